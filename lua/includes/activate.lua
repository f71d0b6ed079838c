-- hand one ready job to a worker: attempts+1, active until the lease deadline,
-- and the PX lock a worker holds while it owns the job
local function activate(base, id, lease, token, now)
  local jk = base .. 'job:' .. id
  local att = redis.call('HINCRBY', jk, 'attempts', 1)
  redis.call('HSET', jk, 'state', 'active')
  redis.call('ZADD', base .. 'active', now + lease, id)
  redis.call('SET', jk .. ':lock', token, 'PX', lease)
  emit(base, {event = 'active', job = id, attempts = att})
  return {id, redis.call('HGET', jk, 'payload'), att}
end

-- the flat claim body: the head of pending (priority, then id order)
local function claim_flat(pending, base, lease, token)
  local now = now_ms()
  while true do
    local head = redis.call('ZPOPMIN', pending)
    if #head == 0 then return {} end
    local id = head[1]
    -- an id whose row is gone is dropped, not served
    if redis.call('EXISTS', base .. 'job:' .. id) == 1 then
      return activate(base, id, lease, token, now)
    end
  end
end

-- the grouped claim body: runnable lanes round-robin off the ring
local function claim_lanes(ring, base, lease, token)
  local now = now_ms()
  local n = redis.call('LLEN', ring)
  for _ = 1, n do
    local g = redis.call('LPOP', ring)
    if not g then break end
    redis.call('HDEL', lane_meta(base, g), 'ring')
    if lane_runnable(base, g) then
      local head = redis.call('ZPOPMIN', lane_pending(base, g))
      local id = head[1]
      redis.call('HINCRBY', lane_meta(base, g), 'active', 1)
      -- still runnable: back to the tail of the ring, round-robin
      if lane_runnable(base, g) and redis.call('HSETNX', lane_meta(base, g), 'ring', '1') == 1 then
        redis.call('RPUSH', ring, g)
      end
      if redis.call('EXISTS', base .. 'job:' .. id) == 1 then
        return activate(base, id, lease, token, now)
      end
      lane_release(base, g)
    end
  end
  return {}
end
