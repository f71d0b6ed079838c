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
local jk, id, base = KEYS[1], ARGV[1], KEYS[3]
if redis.call('EXISTS', jk) == 0 then return -1 end
if not redis.call('ZSCORE', KEYS[2], id) then return redis.error_reply('EMQSTATE not active') end
local row = redis.call('HMGET', jk, 'group', 'dedup', 'attempts', 'owner', 'claimed_at')
-- a row claimed with no token (an older node) has no owner: any caller may finish it
if ARGV[2] and row[4] and row[4] ~= '' and row[4] ~= ARGV[2] then
  return redis.error_reply('EMQSTATE not owner')
end
local nums, bad = row_wholes(jk)
if not nums then return bad_row(bad, id) end
if row[1] then
  local refused = lane_refusal(base, row[1])
  if refused then return refused end
end
local keep = metrics_keep(base)
if not keep then return bad_row('metrics_keep', 'meta') end
-- every check has run: now the writes
redis.call('ZREM', KEYS[2], id)
if row[1] then lane_release(base, row[1]) end
release_dedup(base, row[2], id)
del_job(base, id)
local now = now_ms()
bump_metric(base, 'completed', now, keep)
local claimed_at = whole_of(row[5])
if claimed_at then record_latency(base, 'run', now - claimed_at, now, keep) end
emit(base, {event = 'completed', job = id, attempts = nums.attempts})
return 1
