--@include metrics
--@include ids
--@include chunks
-- latency (extension): per-minute histograms kept on the server, so no verb reads
-- rows to know how long jobs wait and run. `wait` is the claim time minus the later
-- of the row's `created_at` and `due_at`; `run` is the complete / fail time minus
-- `claimed_at`. emq:{q}:lat:wait:<minute> and emq:{q}:lat:run:<minute> are hashes
-- bucket -> count; emq:{q}:lat:minutes indexes the minutes (a zset, score = minute)
-- and keeps the last `metrics_keep` of them, like the metrics hashes.
-- Buckets are log-spaced by 1.1, so a bucket's middle is within 5% of any value in
-- it: bucket 0 holds 0 ms, bucket b >= 1 holds [1.1^(b-1), 1.1^b) ms.

-- math.log(1.1) written out, the same double as Python's (an include's top level
-- reads no global but `redis`, lua/README.md)
local LAT_RATIO_LOG = 0.09531017980432493

local function lat_bucket(ms)
  if ms < 1 then return 0 end
  return math.floor(math.log(ms) / LAT_RATIO_LOG) + 1
end

-- the oldest `over` minutes of the index go, both their hashes with them, walked in
-- chunks (chunks.lua `each_member`) within about TRIM_BYTES of their names: a minute is
-- a number, but another node may have written any member there. The minutes walked
-- are the lowest ranks, so one ZREMRANGEBYRANK takes them out. The trim stops at
-- `minute`, the one just counted: what ranks after it is no older.
local function trim_minutes(base, index, over, minute)
  local reached = false
  local n = each_member(index, 0, over, TRIM_BYTES, function(m)
    if m == minute then
      reached = true
      return 0, true
    end
    redis.call('DEL', base .. 'lat:wait:' .. m, base .. 'lat:run:' .. m)
    return id_cost(m)
  end)
  if reached then n = n - 1 end
  if n > 0 then redis.call('ZREMRANGEBYRANK', index, 0, n - 1) end
end

-- count one sample of `kind` ('wait' or 'run') in the minute of `now`; a minute
-- new to the index may push the oldest out, both its hashes with it (the oldest
-- TRIM_MOST at most). `keep` is metrics_keep(base), checked by the caller before its
-- first write. It never fails (count_in; a minutes index of another type than a zset
-- is left alone).
local function record_latency(base, kind, ms, now, keep)
  local minute = string.format('%.0f', math.floor(now / 60000))
  local hk = base .. 'lat:' .. kind .. ':' .. minute
  local bucket = string.format('%d', lat_bucket(math.max(ms, 0)))
  -- a bucket counted before in this minute means the minute is in the index already
  if count_in(hk, bucket) ~= 1 then return end
  local index = base .. 'lat:minutes'
  if redis.pcall('ZADD', index, 'NX', minute, minute) == 1 then
    -- the oldest TRIM_MOST minutes at most a call (metrics.lua)
    local over = math.min(redis.call('ZCARD', index) - keep, TRIM_MOST)
    if over > 0 then trim_minutes(base, index, over, minute) end
  end
end
