-- @update_data -- replace the row's payload.
-- KEYS[1] = the row, KEYS[2] = the queue base root ; ARGV[1] = the payload, ARGV[2] = id
-- returns 1; -1 for a missing row; EMQSTATE bad row type in <id> for a key of another
-- type than a hash (another client's) -- nothing written for either
--@include common
local refused = row_refusal(KEYS[1], ARGV[2])
if refused then return refused end
redis.call('HSET', KEYS[1], 'payload', ARGV[1])
emit(KEYS[2], {event = 'data', job = ARGV[2]})
return 1
