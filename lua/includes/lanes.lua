-- lane bookkeeping (extension): emq:{q}:g:<g>:pending is the lane backlog,
-- emq:{q}:g:<g>:meta holds limit (default 1), active, paused and the ring flag,
-- emq:{q}:ring is the list of runnable lanes, emq:{q}:wake the wake tokens,
-- emq:{q}:groups the set of known groups.

--@include reads

-- runnable: not paused, under its limit, and something waiting (an unreadable
-- meta is not runnable: a wake never errors half-way through a script)
local function lane_runnable(base, g)
  local limit, active, paused = measured_lane_counts(base, g)
  if limit == nil or paused then return false end
  return active < limit and redis.call('ZCARD', lane_pending(base, g)) > 0
end

-- a runnable lane not yet on the ring joins it and pushes a wake token
local function lane_wake(base, g)
  if lane_runnable(base, g) and redis.call('HSETNX', lane_meta(base, g), 'ring', '1') == 1 then
    redis.call('RPUSH', base .. 'ring', g)
    redis.call('RPUSH', base .. 'wake', g)
    redis.call('LTRIM', base .. 'wake', -1000, -1)
  end
end

-- a grouped job waits in its lane; the lane may become runnable
local function lane_push(base, g, score, id)
  redis.call('SADD', base .. 'groups', g)
  redis.call('ZADD', lane_pending(base, g), score, id)
  lane_wake(base, g)
end

-- an in-flight grouped job left active: give its slot back
local function lane_release(base, g)
  local mk = lane_meta(base, g)
  -- an unreadable count is left as it is (callers that move a job refuse it first)
  if measured_lane_counts(base, g) == nil then return end
  if tonumber(redis.call('HINCRBY', mk, 'active', -1)) < 0 then
    redis.call('HSET', mk, 'active', '0')
  end
  lane_wake(base, g)
end

-- a job ready to run: its lane when grouped, else the flat pending set
local function make_ready(base, id, group, score)
  if group then
    lane_push(base, group, score, id)
  else
    redis.call('ZADD', base .. 'pending', score, id)
  end
end
