-- @promote -- due scheduled jobs (delayed, or retrying) become ready: pending,
-- or their lane for a grouped job.
-- KEYS[1] = schedule, KEYS[2] = the queue base root ; ARGV[1] = budget
-- returns the number promoted
--@include common
--@include lanes
local base = KEYS[2]
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_ms(), 'LIMIT', 0, tonumber(ARGV[1]))
for _, id in ipairs(ids) do
  redis.call('ZREM', KEYS[1], id)
  local jk = base .. 'job:' .. id
  local row = redis.call('HMGET', jk, 'group', 'priority')
  if redis.call('EXISTS', jk) == 1 then
    redis.call('HSET', jk, 'state', 'pending')
    make_ready(base, id, row[1], tonumber(row[2] or '0'))
    emit(base, {event = 'promoted', job = id})
  end
end
return #ids
