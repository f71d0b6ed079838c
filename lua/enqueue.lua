-- @enqueue -- add one job: a row, then pending, its lane, or the schedule set.
-- KEYS[1] = the queue base root
-- ARGV = id, payload, group ('' = flat), delay_ms, priority, max_attempts,
--        dedup key ('' = none), backoff_ms
-- returns {id, 1} when created; {holder, 0} when the dedup key is held or the
-- id already has a row (nothing written); an error for a number that is not whole.
--@include common
--@include lanes
--@include enqueue_row
local delay, priority, refused = enqueue_numbers(ARGV[4], ARGV[5], ARGV[6], ARGV[8])
if refused then return refused end
return add_job(KEYS[1], ARGV[1], ARGV[2], ARGV[3], delay, priority, ARGV[6], ARGV[7], ARGV[8], now_ms())
