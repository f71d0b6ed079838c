-- @resume -- clear the field; claiming resumes at the head of pending.
-- KEYS[1] = emq:{q}:meta ; ARGV[1] = the queue base root (for the event)
-- returns 1. Idempotent.
--@include common
redis.call('HDEL', KEYS[1], 'paused')
emit(ARGV[1], {event = 'resumed'})
return 1
