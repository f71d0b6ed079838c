-- @enqueue_many -- add a chunk of jobs that share group, delay, priority,
-- attempts and backoff, each as @enqueue would add it (extension).
-- KEYS[1] = the queue base root
-- ARGV = group ('' = flat), delay_ms, priority, max_attempts, backoff_ms,
--        then one triple per job: id, payload, dedup key ('' = none)
-- returns the id that answers for each job, in order: its own when created; the
--   holder when its dedup key is held or its id already has a row (that job writes
--   nothing). An error, with nothing written, for a number that is not whole or a job
--   list that is not whole triples. The clock, the meta hash, the set's ZADD and the
--   lane's wake are done once a chunk; bounded by the chunk jobs.enqueue_many sends
--   (about defaults.BYTE_BUDGET bytes), each job a dedup read, an EXISTS, an HSET and an event.
--@include common
--@include lanes
--@include enqueue_row
-- every check runs before the first write
local delay, priority, refused = enqueue_numbers(ARGV[2], ARGV[3], ARGV[4], ARGV[5])
if refused then return refused end
if #ARGV < 5 or (#ARGV - 5) % 3 ~= 0 then
  return redis.error_reply('ERR enqueue_many takes id, payload, dedup triples after 5 arguments')
end
return (add_jobs(KEYS[1], ARGV[1], delay, priority, ARGV[4], ARGV[5], ARGV, 6, now_ms()))
