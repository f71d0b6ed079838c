-- a new job's row and its placement, shared by @enqueue and @enqueue_many

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

-- write a new job's row and place it: schedule when delayed, else ready
local function add_job(base, id, payload, group, delay, priority, max_attempts, dedup, backoff, now)
  local holder = held_by(base, id, dedup)
  if holder then return {holder, 0} end
  -- every queue has a meta hash, so queues are found by their meta key
  redis.call('HSETNX', base .. 'meta', 'created_at', tostring(now))
  if delay > 0 then
    write_row(base, id, payload, group, max_attempts, priority, backoff, dedup, now, 'schedule', now + delay)
    redis.call('ZADD', base .. 'schedule', now + delay, id)
  else
    write_row(base, id, payload, group, max_attempts, priority, backoff, dedup, now, 'pending')
    make_ready(base, id, group ~= '' and group or nil, priority)
  end
  emit_job(base, 'added', id, group ~= '' and group or nil)
  return {id, 1}
end
