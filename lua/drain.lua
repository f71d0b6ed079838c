-- @drain -- wipe a set's rows and logs, then the set itself; bounded.
-- KEYS[1] = the queue base root; KEYS[2] = pending; KEYS[3] = schedule (optional)
-- ARGV[1] = budget: at most this many jobs in one call (extension; EchoMQ's
-- Elixir Admin sends no ARGV and drains everything)
-- returns {n, more}: n jobs drained by this call, more = 1 while work remains;
-- with no budget sent, EchoMQ's own reply: n, the count drained.
-- Active jobs and the repeat registry are never touched; lane backlogs are
-- pending work too and are drained; held dedup keys are released.
-- A drain reads no numeric field of a row, so a bad row drains like any other.
--@include common
--@include lanes
local base = KEYS[1]
local unbounded = ARGV[1] == nil
local budget = unbounded and MAX_WHOLE or tonumber(ARGV[1])
local n = 0
-- a row is read for its dedup key only while the queue holds any
local has_dedup = redis.call('EXISTS', base .. 'dedup') == 1
local function wipe(setkey)
  local ids = redis.call('ZRANGE', setkey, 0, budget - n - 1)
  for _, id in ipairs(ids) do
    -- the row key derives from the base root
    local jk = base .. 'job:' .. id
    if has_dedup then release_dedup(base, redis.call('HGET', jk, 'dedup'), id) end
    -- the row and its logs subkey
    redis.call('DEL', jk, jk .. ':logs')
  end
  -- the same ranks just read: no unpack limit on a large budget
  if #ids > 0 then redis.call('ZREMRANGEBYRANK', setkey, 0, #ids - 1) end
  n = n + #ids
  return n >= budget
end
local function finish(more)
  if n > 0 then emit(base, {event = 'drained', count = n}) end
  if unbounded then return n end
  return {n, more}
end
-- pending, the lanes' backlogs, then the schedule set when asked
if wipe(KEYS[2]) then return finish(1) end
for _, g in ipairs(redis.call('SMEMBERS', base .. 'groups')) do
  if wipe(lane_pending(base, g)) then return finish(1) end
end
if KEYS[3] and wipe(KEYS[3]) then return finish(1) end
return finish(0)
