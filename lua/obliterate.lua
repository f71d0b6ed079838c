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
local spent = 0
local function sweep(sk, in_flight)
  local ids = redis.call('ZRANGE', sk, 0, budget - 1)
  for _, id in ipairs(ids) do destroy(id, in_flight) end
  if #ids > 0 then
    redis.call('ZREMRANGEBYRANK', sk, 0, #ids - 1)
    budget = budget - #ids
    spent = spent + #ids
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
  if sweep(lane_pending(base, g)) then return 1 end
  redis.call('DEL', lane_meta(base, g))
  redis.call('SREM', base .. 'groups', g)
end
-- the latency histograms: two hashes a minute, at most metrics_keep minutes (the
-- same bound as the fields of the metrics hashes deleted with them)
local index = base .. 'lat:minutes'
for _, m in ipairs(redis.call('ZRANGE', index, 0, -1)) do
  redis.call('DEL', base .. 'lat:wait:' .. m, base .. 'lat:run:' .. m)
end
-- the repeat records, the metrics hashes, the dedup keys, the ring
redis.call('DEL', base .. 'groups', base .. 'ring', base .. 'wake',
  base .. 'repeat', base .. 'repeat:defs', index, base .. 'metrics:claimed',
  base .. 'metrics:completed', base .. 'metrics:failed', base .. 'dedup')

-- what no set references (orphan rows, logs, locks, anything else under the
-- base): a SCAN sweep. The queue is gone only after a whole pass that found
-- nothing under the base but meta. When a whole pass fits in what is left of
-- the budget it runs inside this one call, so no key can be made behind its
-- cursor; on a keyspace too large for that, the cursor is kept in meta (`sweep`)
-- between calls, and a pass that deleted anything (`swept`), or that resumes
-- after the sets held new work, is followed by another.
local cursor, dirty
if redis.call('DBSIZE') <= budget * 5 then
  cursor, dirty = '0', false
else
  cursor = redis.call('HGET', meta, 'sweep') or '0'
  dirty = redis.call('HGET', meta, 'swept') == '1' or (spent > 0 and cursor ~= '0')
end
while true do
  local page = redis.call('SCAN', cursor, 'MATCH', base .. '*', 'COUNT', 1000)
  cursor = page[1]
  for _, k in ipairs(page[2]) do
    if k ~= meta then redis.call('DEL', k); budget = budget - 1; dirty = true end
  end
  -- a page of 1000 slots is charged like 100 deletes, so a call stays bounded
  -- however large the rest of the keyspace is
  budget = budget - 100
  if cursor == '0' then
    -- a whole pass that found nothing: the queue is gone
    if not dirty then break end
    -- the pass found something: the next one starts from the beginning
    dirty = false
  end
  if budget <= 0 then
    redis.call('HSET', meta, 'sweep', cursor, 'swept', dirty and '1' or '0')
    return 1
  end
end
-- and last the meta hash with the paused flag
redis.call('DEL', meta)
emit(base, {event = 'obliterated'})
return 0
