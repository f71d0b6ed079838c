-- @fail -- a worker failed the job: retry later through the schedule set with
-- exponential backoff, or dead when out of attempts.
-- KEYS[1] = the row, KEYS[2] = active, KEYS[3] = the queue base root
-- ARGV[1] = id, ARGV[2] = the error text
-- returns 'retry' or 'dead'; -1 for a missing row; EMQSTATE not active
--@include common
--@include lanes
--@include metrics
local jk, id, base = KEYS[1], ARGV[1], KEYS[3]
if redis.call('EXISTS', jk) == 0 then return -1 end
if not redis.call('ZSCORE', KEYS[2], id) then return redis.error_reply('EMQSTATE not active') end
local row = redis.call('HMGET', jk, 'group', 'dedup', 'attempts', 'max_attempts', 'backoff')
local now = now_ms()
redis.call('ZREM', KEYS[2], id)
redis.call('DEL', jk .. ':lock')
if row[1] then lane_release(base, row[1]) end
local failures = redis.call('HINCRBY', jk, 'failures', 1)
redis.call('HSET', jk, 'last_error', ARGV[2])
bump_metric(base, 'failed', now)
local attempts = tonumber(row[3] or '0')
if attempts >= tonumber(row[4] or '1') then
  -- out of attempts: dead, scored by the time of death; the dedup key is free again
  redis.call('HSET', jk, 'state', 'dead')
  redis.call('ZADD', base .. 'dead', now, id)
  release_dedup(base, row[2], id)
  emit(base, {event = 'dead', job = id, attempts = attempts, failures = failures, error = ARGV[2]})
  return 'dead'
end
local delay = tonumber(row[5] or '1000') * (2 ^ (attempts - 1))
redis.call('HSET', jk, 'state', 'schedule')
redis.call('ZADD', base .. 'schedule', now + delay, id)
emit(base, {event = 'retry', job = id, attempts = attempts, failures = failures, error = ARGV[2], due = now + delay})
return 'retry'
