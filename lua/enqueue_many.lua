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
--@include slices
local base, group = KEYS[1], ARGV[1]
-- every check runs before the first write
local delay, priority, refused = enqueue_numbers(ARGV[2], ARGV[3], ARGV[4], ARGV[5])
if refused then return refused end
if #ARGV < 5 or (#ARGV - 5) % 3 ~= 0 then
  return redis.error_reply('ERR enqueue_many takes id, payload, dedup triples after 5 arguments')
end
local max_attempts, backoff = ARGV[4], ARGV[5]
local now = now_ms()
local state, score = 'pending', priority
if delay > 0 then state, score = 'schedule', now + delay end
local answers, members = {}, {}
for i = 6, #ARGV, 3 do
  local id, payload, dedup = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local holder = held_by(base, id, dedup)
  if holder then
    answers[#answers + 1] = holder
  else
    write_row(base, id, payload, group, max_attempts, priority, backoff, dedup, now, state,
              delay > 0 and score or nil)
    local n = #members
    members[n + 1], members[n + 2] = score, id
    emit_job(base, 'added', id, group ~= '' and group or nil)
    answers[#answers + 1] = id
  end
end
if #members == 0 then return answers end
-- every queue has a meta hash, so queues are found by their meta key
redis.call('HSETNX', base .. 'meta', 'created_at', tostring(now))
local target = base .. 'pending'
if delay > 0 then
  target = base .. 'schedule'
elseif group ~= '' then
  redis.call('SADD', base .. 'groups', group)
  target = lane_pending(base, group)
end
in_slices('ZADD', target, members)
if delay == 0 and group ~= '' then lane_wake(base, group) end
return answers
