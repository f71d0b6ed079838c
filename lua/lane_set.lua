-- @lane_set -- set a lane's limit or pause flag, then let it rejoin the ring
-- when it has become runnable.
-- KEYS[1] = the lane meta, KEYS[2] = the queue base root
-- ARGV[1] = group, ARGV[2] = 'limit' | 'pause' | 'resume', ARGV[3] = the limit
-- returns 1; an error for a limit that is not a whole number >= 1 (nothing written)
--@include common
--@include lanes
local base, g, what = KEYS[2], ARGV[1], ARGV[2]
local limit = whole_of(ARGV[3])
if what == 'limit' and not (limit and limit >= 1) then
  return redis.error_reply('ERR a lane limit must be a whole number >= 1')
end
redis.call('HSETNX', base .. 'meta', 'created_at', tostring(now_ms()))
redis.call('SADD', base .. 'groups', g)
if what == 'limit' then
  redis.call('HSET', KEYS[1], 'limit', ARGV[3])
elseif what == 'pause' then
  redis.call('HSET', KEYS[1], 'paused', '1')
else
  redis.call('HDEL', KEYS[1], 'paused')
end
lane_wake(base, g)
return 1
