-- @move_clear -- end a batch's jobs in the source once the target has answered: delete
-- those the target holds, put back those it refused, clear their journal entries
-- (extension; transfer.move_jobs, step 3 of 3).
-- KEYS[1] = the queue base root
-- ARGV[1] = the batch; ARGV[2] = the owner; then pairs: an id and its word ('moved' or
--   'same': the target holds it, its row, :logs and :lock here deleted and its dedup key
--   given back; any other: it stays, back in its set at its score, or, its row gone, only
--   its entry cleared)
-- returns {1 when the batch is done (its journal entry gone) else 0, then a word per id:
-- 'deleted', 'back' (in its set again), 'dropped' (its row gone: only its entry
-- cleared) or 'absent' (not in the journal: another call ended it)}; {'lost'} when
-- another owner holds the batch now (nothing written).
-- Bounded by its ids: transfer.move_jobs sends the ids of one batch, at most `budget`.
--@include common
--@include lanes
local base, batch = KEYS[1], ARGV[1]
local journal, jobs = base .. 'moving', base .. 'moving:' .. batch
local entry = redis.call('HGET', journal, batch)
if entry and string.match(entry, '^(%S+)') ~= ARGV[2] then return {'lost'} end
local words = {}
for i = 3, #ARGV, 2 do
  local id, word = ARGV[i], ARGV[i + 1]
  local held = redis.call('HGET', jobs, id)
  local state, score = string.match(held or '', '^(%S+) (%S+)$')
  local jk = base .. 'job:' .. id
  local said = 'absent'
  if not state then
    -- another call ended it
  elseif word == 'moved' or word == 'same' then
    local dedup = redis.pcall('HGET', jk, 'dedup')
    if type(dedup) == 'string' then release_dedup(base, dedup, id) end
    del_job(base, id)
    said = 'deleted'
  elseif redis.pcall('HLEN', jk) ~= 0 then
    if state == 'pending' then
      local g = redis.pcall('HGET', jk, 'group')
      make_ready(base, id, type(g) == 'string' and g or nil, score)
    else
      redis.call('ZADD', base .. state, score, id)
    end
    said = 'back'
  else
    said = 'dropped'
  end
  if state then redis.call('HDEL', jobs, id) end
  words[#words + 1] = said
end
local done = 0
if redis.call('EXISTS', jobs) == 0 then
  redis.call('HDEL', journal, batch)
  done = 1
end
return {done, unpack(words)}
