-- @repeat_add -- register (or replace) a repeatable: every `every_ms` it
-- produces a new job with the same payload.
-- KEYS[1] = the queue base root
-- ARGV = name, every_ms, payload, group ('' = flat), max_attempts
-- returns the first due time (ms)
--@include common
local base = KEYS[1]
local now = now_ms()
local every = tonumber(ARGV[2])
redis.call('HSETNX', base .. 'meta', 'created_at', tostring(now))
redis.call('HSET', base .. 'repeat:defs', ARGV[1],
  cjson.encode({every = every, payload = ARGV[3], group = ARGV[4], max_attempts = ARGV[5]}))
redis.call('ZADD', base .. 'repeat', now + every, ARGV[1])
return now + every
