-- @enqueue -- add one job: a row, then pending, its lane, or the schedule set.
-- KEYS[1] = the queue base root
-- ARGV = id, payload, group ('' = flat), delay_ms, priority, max_attempts,
--        dedup key ('' = none), backoff_ms
-- returns {id, 1} when created; {holder, 0} when the dedup key is held or the
-- id already has a row (nothing written); an error for a number that is not whole.
--@include common
--@include lanes
--@include enqueue_row
-- every number is checked before the first write (the Python side bounds them too)
local delay, priority = whole_of(ARGV[4]), whole_of(ARGV[5])
for i, v in ipairs({delay or false, priority or false, whole_of(ARGV[6]) or false, whole_of(ARGV[8]) or false}) do
  if v == false then
    return redis.error_reply('ERR ' .. ({'delay_ms', 'priority', 'max_attempts', 'backoff_ms'})[i]
      .. ' must be a whole number')
  end
end
return add_job(KEYS[1], ARGV[1], ARGV[2], ARGV[3], delay, priority, ARGV[6], ARGV[7], ARGV[8], now_ms())
