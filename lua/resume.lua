-- @resume -- clear the field; claiming resumes at the head of pending.
-- KEYS[1] = emq:{q}:meta ; ARGV[1] = the queue base root (for the event; optional:
-- EchoMQ's Elixir Admin sends no ARGV, and the base is the meta key less its 'meta')
-- returns 1. Idempotent.
-- A live queue may gain any key, so an obliterate's SCAN sweep left half-way
-- (`sweep`, `swept` on meta) starts again from the beginning next time.
--@include common
redis.call('HDEL', KEYS[1], 'paused', 'sweep', 'swept')
emit(ARGV[1] or string.sub(KEYS[1], 1, -5), {event = 'resumed'})
return 1
