-- @reprocess2 -- move one dead job back to pending.
-- KEYS[1] = the row, KEYS[2] = dead, KEYS[3] = pending, KEYS[4] = the queue base
-- ARGV[1] = id
-- returns 1; -1 for a missing row; EMQSTATE not dead for a job not in dead
--@include common
--@include lanes
local jk = KEYS[1]
-- no row: gone
if redis.call('EXISTS', jk) == 0 then return -1 end
local id = ARGV[1]
-- the ZREM is the dead check: a job not in dead is refused before any write
if redis.call('ZREM', KEYS[2], id) ~= 1 then
  return redis.error_reply('EMQSTATE not dead')
end
local base = KEYS[4]
-- the counters stay; only the error and the state change
redis.call('HDEL', jk, 'last_error')
redis.call('HSET', jk, 'state', 'pending')
local g = redis.call('HGET', jk, 'group')
if g then
  -- a grouped job returns to its lane, not the flat set; an unpaused lane
  -- under its limit rejoins the ring and pushes a wake token
  lane_push(base, g, 0, id)
else
  -- a flat job returns to pending at score 0
  redis.call('ZADD', KEYS[3], 0, id)
end
emit(base, {event = 'reprocessed', job = id})
return 1
