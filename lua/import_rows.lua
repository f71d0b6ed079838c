-- @import_rows -- add jobs read from a file, each row as its record says, where its id
-- has no key yet (extension).
-- KEYS[1] = the queue base root
-- ARGV[1] = the state (pending or dead); then per job: its id, its time of death for dead
--   ('' = now; ignored for pending, whose score is its `priority`), n, and n field
--   name/value pairs (its `state` among them, the state named)
-- returns one word per job, in order: 'added'; 'skipped' when a key of that id is there
-- already (nothing written for it). ERR, nothing written, for another state, a job list
-- that is not whole jobs, or a priority or time that is not a whole number.
-- Publishes one `imported` event a call, its count. Bounded by its jobs:
-- transfer.import_jobs sends at most `budget` jobs and about defaults.BYTE_BUDGET bytes
-- a call (a larger row alone in its call).
--@include common
--@include lanes
--@include put_row
local base, state = KEYS[1], ARGV[1]
if state ~= 'pending' and state ~= 'dead' then
  return redis.error_reply('ERR import takes pending or dead, not ' .. state)
end
local jobs, refused = sent_jobs(ARGV, 2)
if not jobs then return refused end
local now = now_ms()
-- every check before the first write: each job's score
for _, job in ipairs(jobs) do
  local score = job[2]
  if state == 'pending' then
    score = '0'
    for k = 1, #job[3], 2 do
      if job[3][k] == 'priority' then score = job[3][k + 1] end
    end
  elseif score == '' then
    score = tostring(now)
  end
  if not whole_of(score) then return redis.error_reply('ERR a score is a whole number, not ' .. score) end
  job[2] = score
end
local words, members, added = {}, {}, 0
for i, job in ipairs(jobs) do
  if redis.call('EXISTS', base .. 'job:' .. job[1]) == 1 then
    words[i] = 'skipped'
  else
    put_job(base, job, state, job[2], members)
    words[i], added = 'added', added + 1
  end
end
add_members(base .. state, members)
if added > 0 then
  -- every queue has a meta hash, so queues are found by their meta key
  redis.call('HSETNX', base .. 'meta', 'created_at', tostring(now))
  emit(base, {event = 'imported', count = added})
end
return words
