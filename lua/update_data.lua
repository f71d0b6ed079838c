-- @update_data -- replace the row's payload.
-- KEYS[1] = the row, KEYS[2] = the queue base root ; ARGV[1] = the payload, ARGV[2] = id
-- returns 1; -1 for a missing row (nothing written)
--@include common
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
redis.call('HSET', KEYS[1], 'payload', ARGV[1])
emit(KEYS[2], {event = 'data', job = ARGV[2]})
return 1
