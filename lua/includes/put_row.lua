-- a job row written whole into a queue and placed in its state's set, shared by
-- @import_rows and @move_put: the row's fields as the caller sends them, then its set
--@include slices

-- the jobs of ARGV from `from` on, as the caller lays each out: its id, its score, n,
-- then n field name/value pairs. Answers a list of {id, score, fields (as HSET takes
-- them), group (false when flat)}, or nil and the error for a list that is not whole jobs
local function sent_jobs(argv, from)
  local jobs, at = {}, from
  while at <= #argv do
    local n = tonumber(argv[at + 2])
    if not n or n < 1 or at + 2 + 2 * n > #argv then
      return nil, redis.error_reply('ERR a job is its id, its score, n and n field name/value pairs')
    end
    local fields, group = {unpack(argv, at + 3, at + 2 + 2 * n)}, false
    for k = 1, #fields, 2 do
      if fields[k] == 'group' then group = fields[k + 1] end
    end
    jobs[#jobs + 1] = {argv[at], argv[at + 1], fields, group}
    at = at + 3 + 2 * n
  end
  return jobs
end

-- write job `job` (a `sent_jobs` entry) into queue `base` as `state` at `score`: its row,
-- one HSET of the fields sent; a pending job then goes to its lane when grouped, else to
-- the flat set; a job of another state is added to `members` (score, id) for the
-- caller's one ZADD (`add_members`)
local function put_job(base, job, state, score, members)
  redis.call('HSET', base .. 'job:' .. job[1], unpack(job[3]))
  if state == 'pending' then
    make_ready(base, job[1], job[4] or nil, score)
  else
    local n = #members
    members[n + 1], members[n + 2] = score, job[1]
  end
end

-- the members a call collected (`put_job`) added to sorted set `set`
local function add_members(set, members) in_slices('ZADD', set, members) end
