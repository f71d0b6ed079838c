-- @expire -- lease expiry: an in-flight job whose lease deadline passed goes
-- back to pending (or its lane), `stalled` counted, its lock removed.
-- KEYS[1] = active, KEYS[2] = the queue base root ; ARGV[1] = budget
-- returns the number of jobs put back
--@include common
--@include lanes
local base = KEYS[2]
local now = now_ms()
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
for _, id in ipairs(ids) do
  local jk = base .. 'job:' .. id
  redis.call('ZREM', KEYS[1], id)
  if redis.call('EXISTS', jk) == 1 then
    local row = redis.call('HMGET', jk, 'group', 'priority')
    redis.call('DEL', jk .. ':lock')
    redis.call('HINCRBY', jk, 'stalled', 1)
    redis.call('HSET', jk, 'state', 'pending')
    if row[1] then lane_release(base, row[1]) end
    make_ready(base, id, row[1], tonumber(row[2] or '0'))
    emit(base, {event = 'stalled', job = id})
  end
end
return #ids
