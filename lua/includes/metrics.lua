-- the throughput record: per-minute buckets, the oldest trimmed past `keep`

-- how many buckets a metrics hash keeps (meta `metrics_keep`, default 1440), or
-- nil when the field holds no whole number >= 1: checked before a script writes
local function keep_of(field)
  local keep = whole_of(field, 1440)
  if keep and keep >= 1 then return keep end
  return nil
end

local function metrics_keep(base)
  return keep_of(redis.call('HGET', base .. 'meta', 'metrics_keep'))
end

-- HINCRBY `key` `bucket` 1, never failing (it runs after a transition's writes): a
-- bucket written by hand that holds no whole count starts again at 1, and a key of
-- another type (not a hash) is left alone (nil). Answers the bucket's count.
local function count_in(key, bucket)
  local n = redis.pcall('HINCRBY', key, bucket, 1)
  if type(n) ~= 'table' then return n end
  if type(redis.pcall('HSET', key, bucket, '1')) == 'table' then return nil end
  return 1
end

-- the most buckets a trim reads by name (HKEYS, then a sort), and the most it deletes in
-- one call: a hash far past its `keep` (keep lowered, or buckets another node wrote) is
-- trimmed TRIM_SAMPLE random buckets a call instead (HRANDFIELD): those before the window
-- of the last `keep` minutes, or not a bucket number, go. One trim of a hash 100,000
-- buckets past keep (an HKEYS, a sort and 99,000 HDELs) held a claim 454 ms
local TRIM_EXACT, TRIM_MOST, TRIM_SAMPLE = 4096, 512, 256

-- count one `kind` event in the minute of `now` (by count_in: it never fails). Only a
-- new bucket can take the hash past `keep` (the caller's metrics_keep(base), read
-- here when not given), so only then is the oldest trimmed: the oldest TRIM_MOST at
-- most, of a hash of TRIM_EXACT buckets at most; a larger one by a sample.
local function bump_metric(base, kind, now, keep)
  local mk = base .. 'metrics:' .. kind
  local minute = math.floor(now / 60000)
  if count_in(mk, tostring(minute)) ~= 1 then return end
  keep = keep or metrics_keep(base) or 1440
  local len = redis.call('HLEN', mk)
  if len <= keep then return end
  local gone = {}
  if len <= TRIM_EXACT then
    local fields = redis.call('HKEYS', mk)
    -- a field that is not a bucket number (written by hand) sorts first and goes first
    table.sort(fields, function(a, b) return (tonumber(a) or -1) < (tonumber(b) or -1) end)
    for i = 1, math.min(#fields - keep, TRIM_MOST) do gone[i] = fields[i] end
  else
    for _, f in ipairs(redis.call('HRANDFIELD', mk, TRIM_SAMPLE)) do
      local m = tonumber(f)
      if not m or m <= minute - keep then gone[#gone + 1] = f end
    end
  end
  if #gone > 0 then redis.call('HDEL', mk, unpack(gone)) end
end
