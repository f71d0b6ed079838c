-- @repeat_remove -- unregister a repeatable; jobs it already produced stay.
-- KEYS[1] = the queue base root ; ARGV[1] = name
-- returns 1 when it was registered, 0 when not (a tick's report of it forgotten either way)
--@include repeat_def
--@include repeat_reported
local base = KEYS[1]
redis.call('HDEL', base .. 'repeat:defs', ARGV[1])
forget_reported(base, ARGV[1])
return redis.call('ZREM', base .. 'repeat', ARGV[1])
