-- @drain -- wipe a set's rows and logs, then the set itself; bounded.
-- KEYS[1] = the queue base root; KEYS[2] = pending; KEYS[3] = schedule (optional)
-- ARGV[1] = budget: jobs at most a call (extension; EchoMQ's Elixir Admin sends no
-- ARGV and drains everything); ARGV[2] = bytes at most (optional: the ids and the
-- payloads their deletes free); ARGV[3] = where the walk of the lanes goes on
-- (optional, the toolkit's: an SSCAN cursor of the groups set, '0' the first call)
-- returns {n, more}: n jobs drained by this call, more = 1 while work remains; with
-- ARGV[3], {n, more, cursor}: the cursor the next call sends; with no budget sent,
-- EchoMQ's own reply: n, the count drained.
-- Active jobs and the repeat registry are never touched; lane backlogs are pending
-- work too (a lane looked at counts a unit of ARGV[1], LANES_A_CALL at most a call; a
-- foreign lane or a backlog that is no sorted set is passed over); held dedup keys are
-- released. A bad row drains like any other; a ghost or a foreign id leaves the set.
--@include common
--@include lanes
local base = KEYS[1]
local unbounded = ARGV[1] == nil
local budget = unbounded and MAX_WHOLE or tonumber(ARGV[1])
local bytes = whole_of(ARGV[2]) or MAX_WHOLE
local n, spent = 0, 0
-- a row is read for its dedup key only while the queue holds any
local has_dedup = redis.call('EXISTS', base .. 'dedup') == 1
local function wipe(setkey)
  local k, _, _, used = each_member(setkey, 0, budget - n, bytes - spent, function(id)
    if foreign_id(id) then return foreign_cost(id) end
    local jk = base .. 'job:' .. id
    if has_dedup then
      local key = redis.pcall('HGET', jk, 'dedup')
      if type(key) == 'string' then release_dedup(base, key, id) end
    end
    local cost = id_cost(id) + payload_bytes(jk)
    redis.call('UNLINK', jk, jk .. ':logs')
    return cost
  end)
  -- the ranks just examined: no unpack limit on a large budget
  if k > 0 then redis.call('ZREMRANGEBYRANK', setkey, 0, k - 1) end
  n, spent = n + k, spent + used
  return n >= budget or spent >= bytes
end
-- a lane's backlog drained, or passed over (a foreign lane, a backlog that is no sorted
-- set). Answers the bytes it spent and true once the call's budget is spent
local function wipe_lane(g)
  local before = spent
  if foreign_lane(g) then
    spent = spent + #g
  else
    spent = spent + id_cost(g)
    local key = lane_pending(base, g)
    local size = redis.pcall('ZCARD', key)
    if type(size) == 'number' and size > 0 then wipe(key) end
  end
  return spent - before, n >= budget or spent >= bytes
end
local cursor = ARGV[3]
local function finish(more)
  if n > 0 then emit(base, {event = 'drained', count = n}) end
  if unbounded then return n end
  if cursor then return {n, more, cursor} end
  return {n, more}
end
-- pending, the lanes' backlogs, then the schedule set when asked
if wipe(KEYS[2]) then return finish(1) end
if cursor then
  -- a call that stops inside a chunk of lanes answers that chunk's cursor (its lanes
  -- are looked at again); it stops there only once it drained a job, so it moves on
  local most = math.min(LANES_A_CALL, budget - n)
  local next_cursor, _, _, stopped = each_lane(base .. 'groups', cursor, most, bytes - spent, function(g)
    local cost, full = wipe_lane(g)
    return cost, full and n > 0
  end)
  cursor = next_cursor
  if stopped or cursor ~= '0' then return finish(1) end
else
  for _, g in ipairs(redis.call('SMEMBERS', base .. 'groups')) do
    local _, full = wipe_lane(g)
    if full then return finish(1) end
  end
end
if KEYS[3] and wipe(KEYS[3]) then return finish(1) end
return finish(0)
