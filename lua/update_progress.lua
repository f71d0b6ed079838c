-- @update_progress -- write the field, then publish the event.
-- KEYS[1] = the row ; ARGV[1] = the progress value, ARGV[2] = id, ARGV[3] = the queue base
-- returns 1; -1 for a missing row; EMQSTATE bad row type in <id> for a key of another
-- type than a hash (another client's)
--@include common
-- no row (or another client's key of another type): refused, and nothing is written
local refused = row_refusal(KEYS[1], ARGV[2])
if refused then return refused end
redis.call('HSET', KEYS[1], 'progress', ARGV[1])
-- ARGV[3] is the queue base, so ARGV[3] .. 'events' is the per-queue events channel
emit(ARGV[3], {event = 'progress', job = ARGV[2], progress = ARGV[1]})
return 1
