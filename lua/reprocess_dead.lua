-- @reprocess_dead -- move dead jobs back, oldest death first, bounded (extension).
-- Flat jobs to pending at score 0, grouped ones to their lanes; counters stay.
-- KEYS[1] = dead, KEYS[2] = pending, KEYS[3] = the queue base root ; ARGV[1] = budget
-- returns {n, more}
--@include common
--@include lanes
local base = KEYS[3]
local ids = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)
for _, id in ipairs(ids) do
  local jk = base .. 'job:' .. id
  if redis.call('EXISTS', jk) == 1 then
    redis.call('HDEL', jk, 'last_error')
    redis.call('HSET', jk, 'state', 'pending')
    local g = redis.call('HGET', jk, 'group')
    if g then lane_push(base, g, 0, id) else redis.call('ZADD', KEYS[2], 0, id) end
    emit(base, {event = 'reprocessed', job = id})
  end
end
if #ids > 0 then redis.call('ZREMRANGEBYRANK', KEYS[1], 0, #ids - 1) end
return {#ids, redis.call('ZCARD', KEYS[1]) > 0 and 1 or 0}
