-- @complete -- a worker finished the job: the row goes (there is no completed
-- set), the metrics record it and its run time (now minus the row's
-- `claimed_at`, when readable), a grouped job gives its lane slot back.
-- KEYS[1] = the row, KEYS[2] = active, KEYS[3] = the queue base root
-- ARGV[1] = id, ARGV[2] = the claim's token (optional; when sent, it must be the
-- row's `owner`)
-- returns 1; -1 for a missing row; EMQSTATE not active for a job not in flight;
-- EMQSTATE not owner (another claim owns the job now); EMQSTATE bad row <field> in <where>
--@include common
--@include lanes
--@include metrics
--@include latency
--@include finish
local jk, id, base = KEYS[1], ARGV[1], KEYS[3]
local refused, row, nums, keep = finish_checks(jk, KEYS[2], base, id, ARGV[2])
if refused then return refused end
-- every check has run: now the writes
redis.call('ZREM', KEYS[2], id)
if row[1] then lane_release(base, row[1]) end
release_dedup(base, row[2], id)
del_job(base, id)
local now = now_ms()
bump_metric(base, 'completed', now, keep)
local claimed_at = whole_of(row[4])
if claimed_at then record_latency(base, 'run', now - claimed_at, now, keep) end
emit(base, {event = 'completed', job = id, attempts = nums.attempts})
return 1
