-- @fail -- a worker failed the job: retry later through the schedule set with
-- exponential backoff (capped at a year), or dead when out of attempts. The run
-- time (now minus the row's `claimed_at`, when readable) is recorded; a retry
-- writes its due time on the row as `due_at`, where the next wait starts.
-- KEYS[1] = the row, KEYS[2] = active, KEYS[3] = the queue base root
-- ARGV[1] = id, ARGV[2] = the error text, ARGV[3] = the claim's token (optional;
-- when sent, it must be the row's `owner`)
-- returns 'retry' or 'dead'; -1 for a missing row; EMQSTATE not active;
-- EMQSTATE not owner; EMQSTATE bad row <field> in <where>
--@include common
--@include lanes
--@include metrics
--@include latency
--@include finish
local jk, id, base = KEYS[1], ARGV[1], KEYS[3]
local refused, row, nums, keep = finish_checks(jk, KEYS[2], base, id, ARGV[3])
if refused then return refused end
-- every check has run: now the writes
local now = now_ms()
redis.call('ZREM', KEYS[2], id)
redis.call('DEL', jk .. ':lock')
redis.call('HDEL', jk, 'owner')
if row[1] then lane_release(base, row[1]) end
local failures = redis.call('HINCRBY', jk, 'failures', 1)
redis.call('HSET', jk, 'last_error', ARGV[2])
bump_metric(base, 'failed', now, keep)
local claimed_at = whole_of(row[4])
if claimed_at then record_latency(base, 'run', now - claimed_at, now, keep) end
local attempts = nums.attempts
if attempts >= nums.max_attempts then
  -- out of attempts: dead, scored by the time of death; the dedup key is free again
  redis.call('HSET', jk, 'state', 'dead')
  redis.call('ZADD', base .. 'dead', now, id)
  release_dedup(base, row[2], id)
  emit(base, {event = 'dead', job = id, attempts = attempts, failures = failures, error = ARGV[2]})
  return 'dead'
end
-- the doubling stops at a year: a due time is always a finite, exact number of ms
local delay = math.floor(math.min(nums.backoff * (2 ^ (attempts - 1)), 31622400000))
redis.call('HSET', jk, 'state', 'schedule', 'due_at', string.format('%.0f', now + delay))
redis.call('ZADD', base .. 'schedule', now + delay, id)
emit(base, {event = 'retry', job = id, attempts = attempts, failures = failures, error = ARGV[2], due = now + delay})
return 'retry'
