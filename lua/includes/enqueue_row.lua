-- a new job's row and its placement, shared by @enqueue and @enqueue_many
--@include slices

-- delay_ms, priority, max_attempts and backoff_ms as an enqueue takes them, each a
-- whole number, checked before the first write (the Python side checks them too).
-- Answers delay and priority, or nil, nil and the refusal naming the first bad one.
local function enqueue_numbers(delay_ms, priority, max_attempts, backoff_ms)
  local sent = {delay_ms = delay_ms, priority = priority, max_attempts = max_attempts, backoff_ms = backoff_ms}
  for _, name in ipairs({'delay_ms', 'priority', 'max_attempts', 'backoff_ms'}) do
    if not whole_of(sent[name]) then return nil, nil, redis.error_reply('ERR ' .. name .. ' must be a whole number') end
  end
  return whole_of(delay_ms), whole_of(priority)
end

-- the id that already answers for a job: the holder of its dedup key, or the id
-- itself when it already has a row; nil when the job may be added. Reads only.
local function held_by(base, id, dedup)
  if dedup ~= '' then
    local holder = redis.call('HGET', base .. 'dedup', dedup)
    if holder then return holder end
  end
  if redis.call('EXISTS', base .. 'job:' .. id) == 1 then return id end
  return nil
end

-- write a new job's row (one HSET) and take its dedup key; the caller places it.
-- A scheduled job's row holds its due time (`due_at`), where its wait starts (a claim
-- measures from it)
local function write_row(base, id, payload, group, max_attempts, priority, backoff, dedup, now, state, due)
  local row = {'payload', payload, 'attempts', '0', 'failures', '0', 'stalled', '0',
    'max_attempts', max_attempts, 'priority', string.format('%.0f', priority), 'backoff', backoff,
    'created_at', tostring(now)}
  if group ~= '' then table.insert(row, 'group'); table.insert(row, group) end
  if dedup ~= '' then
    table.insert(row, 'dedup'); table.insert(row, dedup)
    redis.call('HSET', base .. 'dedup', dedup, id)
  end
  if due then table.insert(row, 'due_at'); table.insert(row, string.format('%.0f', due)) end
  table.insert(row, 'state'); table.insert(row, state)
  redis.call('HSET', base .. 'job:' .. id, unpack(row))
end

-- add the jobs of `list` from `from` on (id, payload, dedup key, ...) that share the
-- rest, as @enqueue_many does: each one's row unless an id already answers for it, then
-- one ZADD (in slices) to the set they share and the lane's wake. Answers the id that
-- answers for each job, in order, and how many were created.
local function add_jobs(base, group, delay, priority, max_attempts, backoff, list, from, now)
  local state, score, due = 'pending', priority, nil
  if delay > 0 then state, score, due = 'schedule', now + delay, now + delay end
  local g = group ~= '' and group or nil
  local answers, members = {}, {}
  for i = from, #list, 3 do
    local id, dedup = list[i], list[i + 2]
    local holder = held_by(base, id, dedup)
    if not holder then
      write_row(base, id, list[i + 1], group, max_attempts, priority, backoff, dedup, now, state, due)
      local n = #members
      members[n + 1], members[n + 2] = score, id
      emit_job(base, 'added', id, g)
    end
    answers[#answers + 1] = holder or id
  end
  if #members == 0 then return answers, 0 end
  -- every queue has a meta hash, so queues are found by their meta key
  redis.call('HSETNX', base .. 'meta', 'created_at', tostring(now))
  local target = base .. 'pending'
  if due then
    target = base .. 'schedule'
  elseif g then
    redis.call('SADD', base .. 'groups', g)
    target = lane_pending(base, g)
  end
  in_slices('ZADD', target, members)
  if not due and g then lane_wake(base, g) end
  return answers, #members / 2
end

-- one job as @enqueue adds it: {id, 1} when created, else {the id that answers for it, 0}
local function add_job(base, id, payload, group, delay, priority, max_attempts, dedup, backoff, now)
  local answers, created = add_jobs(base, group, delay, priority, max_attempts, backoff, {id, payload, dedup}, 1, now)
  return {answers[1], created}
end
