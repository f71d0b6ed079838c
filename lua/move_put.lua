-- @move_put -- write a move's jobs into the target queue, each once: its row as the
-- source holds it, its :logs and its set (extension; transfer.move_jobs, step 2 of 3).
-- KEYS[1] = emq:{target}:arrived:<batch>, KEYS[2] = the queue base root (the target's)
-- ARGV[1] = the state (pending, schedule or dead); ARGV[2] = how long the arrived set is
--   kept (ms); then per job: its id, its score, n, n field name/value pairs, m, and m
--   log lines
-- returns one word per job, in order: 'moved' (written, now or by an earlier call of the
-- same batch: the arrived set says so, whatever became of it since); 'same' (the target
-- holds a row of that id with exactly these fields, and exactly these log lines: nothing
-- written); 'conflict' (it holds another job, or a key of another type, under that id:
-- nothing written). ERR, nothing written, for a job list that is not whole jobs.
-- Publishes one `moved_in` event a call, its count. Bounded by its jobs:
-- transfer.move_jobs sends at most `budget` jobs and about defaults.BYTE_BUDGET bytes of
-- fields and lines a call (a larger job alone in its call).
--@include common
--@include lanes
--@include put_row
local arrived, base, state, keep = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
-- the jobs with their lines: put_row's layout, each job's lines after its fields
local jobs, lines, at = {}, {}, 3
while at <= #ARGV do
  local n = tonumber(ARGV[at + 2])
  local m = n and tonumber(ARGV[at + 3 + 2 * n])
  if not m or at + 3 + 2 * n + m > #ARGV then
    return redis.error_reply('ERR a job is its id, its score, n field pairs, m and m lines')
  end
  local one = sent_jobs({unpack(ARGV, at, at + 2 + 2 * n)}, 1)
  if not one then return redis.error_reply('ERR a job holds no field') end
  jobs[#jobs + 1] = one[1]
  lines[#jobs] = {unpack(ARGV, at + 4 + 2 * n, at + 3 + 2 * n + m)}
  at = at + 4 + 2 * n + m
end

-- true when row `jk` holds exactly the fields `fields` (name/value pairs) and its
-- :logs exactly the lines `lines`
local function same_job(jk, fields, lines)
  if redis.pcall('HLEN', jk) ~= #fields / 2 then return false end
  for k = 1, #fields, 2 do
    if redis.call('HSTRLEN', jk, fields[k]) ~= #fields[k + 1] then return false end
    if redis.call('HGET', jk, fields[k]) ~= fields[k + 1] then return false end
  end
  if redis.pcall('LLEN', jk .. ':logs') ~= #lines then return false end
  for s = 1, #lines, 1000 do
    local held = redis.call('LRANGE', jk .. ':logs', s - 1, math.min(s + 998, #lines - 1))
    for k = 1, #held do
      if held[k] ~= lines[s + k - 1] then return false end
    end
  end
  return true
end

local words, arrivals, members = {}, {}, {}
for i, job in ipairs(jobs) do
  local id = job[1]
  local jk = base .. 'job:' .. id
  if redis.call('SISMEMBER', arrived, id) == 1 then
    words[i] = 'moved'
  elseif redis.call('EXISTS', jk) == 1 then
    words[i] = same_job(jk, job[3], lines[i]) and 'same' or 'conflict'
  else
    -- a :logs list left with no row (another client's) is not this job's
    redis.call('UNLINK', jk .. ':logs')
    put_job(base, job, state, job[2], members)
    for s = 1, #lines[i], 1000 do
      redis.call('RPUSH', jk .. ':logs', unpack(lines[i], s, math.min(s + 999, #lines[i])))
    end
    arrivals[#arrivals + 1] = id
    words[i] = 'moved'
  end
end
-- the set and the arrived set once for the call, in slices unpack takes
add_members(base .. state, members)
for s = 1, #arrivals, 1000 do
  redis.call('SADD', arrived, unpack(arrivals, s, math.min(s + 999, #arrivals)))
end
if #arrivals > 0 then
  redis.call('PEXPIRE', arrived, keep)
  redis.call('HSETNX', base .. 'meta', 'created_at', tostring(now_ms()))
  emit(base, {event = 'moved_in', count = #arrivals})
end
return words
