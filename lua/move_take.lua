-- @move_take -- take a batch of jobs out of their state set into the move journal, before
-- any is written to the target (extension; transfer.move_jobs, step 1 of 3). The rows
-- stay where they are, keyed by this queue, until step 3.
-- KEYS[1] = the queue base root
-- ARGV[1] = the state (pending, schedule or dead); ARGV[2] = the batch (b_ and a ULID,
--   new); ARGV[3] = the owner; ARGV[4] = the lease (ms); ARGV[5] = the target; then the ids
-- returns one pair per id, in order: 'taken' and the score it had; or 'gone' (no row),
-- 'bad_row' (a key of another type), 'not_<state>' (not in that set, nor for pending in
-- its lane), each with false. ERR, nothing written, for a batch the journal holds already.
-- Bounded by its ids: transfer.move_jobs sends at most `budget` ids and about
-- defaults.BYTE_BUDGET bytes of them, each counted ID_WORK times, a call.
--@include reads
local base, state, batch = KEYS[1], ARGV[1], ARGV[2]
local journal, jobs = base .. 'moving', base .. 'moving:' .. batch
if redis.call('HEXISTS', journal, batch) == 1 or redis.call('EXISTS', jobs) == 1 then
  return redis.error_reply('ERR move batch ' .. batch .. ' is in the journal already')
end
local out, taken = {}, 0
for i = 6, #ARGV do
  local id = ARGV[i]
  local jk = base .. 'job:' .. id
  local refused = row_refusal(jk, id)
  local word, score, set = 'not_' .. state, false, base .. state
  if refused == -1 then
    word = 'gone'
  elseif refused then
    word = 'bad_row'
  else
    score = redis.call('ZSCORE', set, id)
    if not score and state == 'pending' then
      local g = redis.call('HGET', jk, 'group')
      if g then
        set = lane_pending(base, g)
        score = redis.call('ZSCORE', set, id)
      end
    end
    if score then
      -- out of its set and into the journal, in this one call
      redis.call('ZREM', set, id)
      redis.call('HSET', jobs, id, state .. ' ' .. score)
      word, taken = 'taken', taken + 1
    end
  end
  out[#out + 1] = word
  out[#out + 1] = score or false
end
if taken > 0 then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('HSET', journal, batch, ARGV[3] .. ' ' .. string.format('%.0f', now + tonumber(ARGV[4])) .. ' ' .. ARGV[5])
end
return out
