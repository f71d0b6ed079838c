-- @obliterate -- destroy a PAUSED queue down to its keyspace footprint, bounded.
-- KEYS[1] = meta, KEYS[2] = the queue base root
-- ARGV[1] = 'force' or '', ARGV[2] = the budget
-- returns 1 (:more, the budget is spent, call again) or 0 (:ok, the queue is gone);
-- EMQSTATE not paused; EMQSTATE active jobs present (unforced, jobs in flight).
--@include common
--@include lanes
local meta = KEYS[1]
local base = KEYS[2]
-- refuse unless paused: the order is pause, then obliterate
if redis.call('HGET', meta, 'paused') == false then
  return redis.error_reply('EMQSTATE not paused')
end
local force = ARGV[1] == 'force'
local budget = tonumber(ARGV[2])

-- a job leaves for good: its dedup key is given back and, when it was in flight,
-- its lane slot, so the queue is consistent after every call, not only the last
-- (the row is read only when there is something to give back)
local has_dedup = redis.call('EXISTS', base .. 'dedup') == 1
local function destroy(id, in_flight)
  if in_flight or has_dedup then
    local row = redis.call('HMGET', base .. 'job:' .. id, 'group', 'dedup')
    if in_flight and row[1] then lane_release(base, row[1]) end
    release_dedup(base, row[2], id)
  end
  del_job(base, id)
end

-- delete up to `budget` jobs of one set, rows first; true when the budget is spent
local function sweep(sk, in_flight)
  local ids = redis.call('ZRANGE', sk, 0, budget - 1)
  for _, id in ipairs(ids) do destroy(id, in_flight) end
  if #ids > 0 then
    redis.call('ZREMRANGEBYRANK', sk, 0, #ids - 1)
    budget = budget - #ids
  end
  return budget <= 0
end

-- active first: refuse on live active jobs unless forced
local active = base .. 'active'
if redis.call('ZCARD', active) > 0 and not force then
  return redis.error_reply('EMQSTATE active jobs present')
end
-- 1 is :more: the budget is spent, call again
if sweep(active, true) then return 1 end

-- the remaining state sets, bounded
for _, t in ipairs({'pending', 'schedule', 'dead'}) do
  if sweep(base .. t) then return 1 end
end

-- every state set is empty: the lanes, their rows first, under the same budget
for _, g in ipairs(redis.call('SMEMBERS', base .. 'groups')) do
  if sweep(base .. 'g:' .. g .. ':pending') then return 1 end
  redis.call('DEL', base .. 'g:' .. g .. ':meta')
  redis.call('SREM', base .. 'groups', g)
end
-- the repeat records, the metrics hashes, the dedup keys, the ring
redis.call('DEL', base .. 'groups', base .. 'ring', base .. 'wake',
  base .. 'repeat', base .. 'repeat:defs',
  base .. 'metrics:completed', base .. 'metrics:failed', base .. 'dedup')

-- what no set references (orphan rows, logs, locks, anything else under the
-- base): a SCAN sweep, its cursor kept in meta between calls
local cursor = redis.call('HGET', meta, 'sweep') or '0'
repeat
  local page = redis.call('SCAN', cursor, 'MATCH', base .. '*', 'COUNT', 1000)
  cursor = page[1]
  for _, k in ipairs(page[2]) do
    if k ~= meta then redis.call('DEL', k); budget = budget - 1 end
  end
  -- a page of 1000 slots is charged like 100 deletes, so a call stays bounded
  -- however large the rest of the keyspace is
  budget = budget - 100
  if cursor ~= '0' and budget <= 0 then
    redis.call('HSET', meta, 'sweep', cursor)
    return 1
  end
until cursor == '0'
-- and last the meta hash with the paused flag
redis.call('DEL', meta)
emit(base, {event = 'obliterated'})
return 0
