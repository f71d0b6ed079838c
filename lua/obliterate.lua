-- @obliterate -- destroy a PAUSED queue down to its keyspace footprint, bounded.
-- KEYS[1] = meta, KEYS[2] = the queue base root
-- ARGV[1] = 'force' or '', ARGV[2] = the budget, ARGV[3] = bytes at most (optional:
-- the members' ids and the payloads their deletes free), ARGV[4] = '1' to be told the
-- jobs deleted (optional, the toolkit's: its audit entry's count)
-- returns 1 (:more, the budget is spent, call again) or 0 (:ok, the queue is gone);
-- with ARGV[4], {1 or 0, the jobs this call deleted};
-- EMQSTATE not paused; EMQSTATE active jobs present (unforced, jobs in flight).
-- Bounded: at most ARGV[2] units of work (a member of a state set or lane, a lane, a
-- key the sweep deletes; a SCAN page costs 100), a day of latency minutes, about
-- ARGV[3] bytes; every key goes by UNLINK. No key is built from a foreign id: its
-- member leaves, the sweep takes the rest.
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
local bytes = whole_of(ARGV[3]) or MAX_WHOLE
local counted = ARGV[4] == '1'

-- a job leaves for good: its dedup key is given back and, when it was in flight, its
-- lane slot (the row is read only when there is something to give back)
local has_dedup = redis.call('EXISTS', base .. 'dedup') == 1
-- the bytes charged: the id's and the payload's
local function destroy(id, in_flight)
  if foreign_id(id) then return foreign_cost(id) end
  local jk = base .. 'job:' .. id
  if in_flight or has_dedup then
    local row = redis.pcall('HMGET', jk, 'group', 'dedup')
    if not row.err then
      if in_flight and row[1] then lane_release(base, row[1]) end
      release_dedup(base, row[2], id)
    end
  end
  local freed = id_cost(id) + payload_bytes(jk)
  del_job(base, id)
  return freed
end

-- delete up to `budget` jobs of one set (and about `bytes`), rows first; true when
-- either budget is spent
local spent, used = 0, 0
-- the reply: 1 (:more) or 0 (:ok), and the members deleted when asked (ARGV[4])
local function answer(more)
  if counted then return {more, spent} end
  return more
end
local function sweep(sk, in_flight)
  local k, _, _, freed = each_member(sk, 0, budget, bytes - used, function(id)
    return destroy(id, in_flight)
  end)
  used = used + freed
  if k > 0 then
    redis.call('ZREMRANGEBYRANK', sk, 0, k - 1)
    budget = budget - k
    spent = spent + k
  end
  return budget <= 0 or used >= bytes
end

-- active first: refuse on live active jobs unless forced
local active = base .. 'active'
if redis.call('ZCARD', active) > 0 and not force then
  return redis.error_reply('EMQSTATE active jobs present')
end
-- 1 is :more: the budget is spent, call again
if sweep(active, true) then return answer(1) end

-- the remaining state sets, bounded
for _, t in ipairs({'pending', 'schedule', 'dead'}) do
  if sweep(base .. t) then return answer(1) end
end

-- every state set is empty: the lanes, their rows first, under the same budget (a
-- lane's meta costs one unit), walked in chunks (chunks.lua `each_lane`; each call
-- starts again, the lanes it finished gone)
local full = false
each_lane(base .. 'groups', '0', budget, bytes - used, function(g)
  local before = used
  if sweep(lane_pending(base, g)) then
    full = true
    return used - before, true
  end
  redis.call('UNLINK', lane_meta(base, g))
  redis.call('SREM', base .. 'groups', g)
  budget, used = budget - 1, used + id_cost(g)
  full = budget <= 0 or used >= bytes
  return used - before, full
end)
if full or redis.call('SCARD', base .. 'groups') > 0 then return answer(1) end
-- the latency histograms: two hashes a minute, each minute a unit of the budget. They
-- go in the call that deletes the metrics hashes, so the throughput record stays whole
-- between calls: at most a day's worth of minutes (DAY, the default metrics_keep) a
-- call, walked in chunks within the bytes left
local DAY = 1440
local index = base .. 'lat:minutes'
local now, _, _, freed = each_member(index, 0, DAY, bytes - used, function(m)
  redis.call('UNLINK', base .. 'lat:wait:' .. m, base .. 'lat:run:' .. m)
  return id_cost(m)
end)
used = used + freed
if now > 0 then redis.call('ZREMRANGEBYRANK', index, 0, now - 1) end
if redis.call('ZCARD', index) > 0 then return answer(1) end
budget = budget - now
-- the repeat records, the metrics hashes, the dedup keys, the ring
redis.call('UNLINK', base .. 'groups', base .. 'ring', base .. 'wake',
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
    if k ~= meta then redis.call('UNLINK', k); budget = budget - 1; dirty = true end
  end
  -- a page of 1000 slots is charged like 100 deletes
  budget = budget - 100
  if cursor == '0' then
    -- a whole pass that found nothing: the queue is gone; else another pass
    if not dirty then break end
    dirty = false
  end
  if budget <= 0 then
    redis.call('HSET', meta, 'sweep', cursor, 'swept', dirty and '1' or '0')
    return answer(1)
  end
end
-- and last the meta hash with the paused flag
redis.call('UNLINK', meta)
emit(base, {event = 'obliterated'})
return answer(0)
