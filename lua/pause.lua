-- @pause -- close the claim gate over the whole queue.
-- KEYS[1] = emq:{q}:meta ; ARGV[1] = the queue base root (for the event; optional:
-- EchoMQ's Elixir Admin sends no ARGV, and the base is the meta key less its 'meta')
-- returns 1. No set moves: the backlog is untouched. Idempotent.
--@include common
redis.call('HSET', KEYS[1], 'paused', '1')
emit(ARGV[1] or string.sub(KEYS[1], 1, -5), {event = 'paused'})
return 1
