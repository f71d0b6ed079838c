-- write a new job's row and place it: schedule when delayed, else ready
local function add_job(base, id, payload, group, delay, priority, max_attempts, dedup, backoff, now)
  if dedup ~= '' then
    local holder = redis.call('HGET', base .. 'dedup', dedup)
    if holder then return {holder, 0} end
  end
  local jk = base .. 'job:' .. id
  if redis.call('EXISTS', jk) == 1 then return {id, 0} end
  -- every queue has a meta hash, so queues are found by their meta key
  redis.call('HSETNX', base .. 'meta', 'created_at', tostring(now))
  local row = {'payload', payload, 'attempts', '0', 'failures', '0', 'stalled', '0',
    'max_attempts', max_attempts, 'priority', string.format('%.0f', priority), 'backoff', backoff,
    'created_at', tostring(now)}
  if group ~= '' then table.insert(row, 'group'); table.insert(row, group) end
  if dedup ~= '' then
    table.insert(row, 'dedup'); table.insert(row, dedup)
    redis.call('HSET', base .. 'dedup', dedup, id)
  end
  if delay > 0 then
    -- the due time, where the job's wait starts (a claim measures from it)
    table.insert(row, 'due_at'); table.insert(row, string.format('%.0f', now + delay))
    table.insert(row, 'state'); table.insert(row, 'schedule')
    redis.call('HSET', jk, unpack(row))
    redis.call('ZADD', base .. 'schedule', now + delay, id)
  else
    table.insert(row, 'state'); table.insert(row, 'pending')
    redis.call('HSET', jk, unpack(row))
    make_ready(base, id, group ~= '' and group or nil, priority)
  end
  emit(base, {event = 'added', job = id, group = group ~= '' and group or nil})
  return {id, 1}
end
