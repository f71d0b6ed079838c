-- the throughput record: per-minute buckets, the oldest trimmed past `keep`

-- how many buckets a metrics hash keeps (meta `metrics_keep`, default 1440), or
-- nil when the field holds no whole number >= 1: checked before a script writes
local function keep_of(field)
  local keep = whole_of(field, 1440)
  if keep and keep >= 1 then return keep end
  return nil
end

-- the queue's `metrics_keep` as keep_of reads it, measured first: a value longer than a
-- whole number holds none, and one another node wrote long is never copied (every claim,
-- complete and fail reads it)
local function metrics_keep(base)
  if redis.call('HSTRLEN', base .. 'meta', 'metrics_keep') > WHOLE_DIGITS then return nil end
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
-- of the last `keep` minutes, or not a bucket number, go
local TRIM_EXACT, TRIM_MOST, TRIM_SAMPLE = 4096, 512, 256
-- the bytes of names a trim reads at most (about: one name at least): a hash is read by
-- name whole only when Valkey measures it within them (MEMORY USAGE, no name copied),
-- else sampled a name at a time while they last (names another node wrote may be long).
-- The embedded fake measures no key: a hash there is read whole up to TRIM_EXACT names
local TRIM_BYTES = 1048576

-- whether hash `key` holds at most `bytes` all told, names and values (true when the
-- server measures no key: the embedded fake, an ACL user without MEMORY USAGE)
local function hash_within(key, bytes)
  local size = redis.pcall('MEMORY', 'USAGE', key, 'SAMPLES', '0')
  return type(size) ~= 'number' or size <= bytes
end

-- count one `kind` event in the minute of `now` (by count_in: it never fails). Only a
-- new bucket can take the hash past `keep` (the caller's metrics_keep(base), read
-- here when not given), so only then is the oldest trimmed: the oldest TRIM_MOST at
-- most, of a hash of TRIM_EXACT buckets at most within TRIM_BYTES; a larger one by a
-- sample of TRIM_SAMPLE names at most, within TRIM_BYTES of them.
local function bump_metric(base, kind, now, keep)
  local mk = base .. 'metrics:' .. kind
  local minute = math.floor(now / 60000)
  if count_in(mk, tostring(minute)) ~= 1 then return end
  keep = keep or metrics_keep(base) or 1440
  local len = redis.call('HLEN', mk)
  if len <= keep then return end
  local gone = {}
  if len <= TRIM_EXACT and hash_within(mk, TRIM_BYTES) then
    -- each name read as a bucket's minute once (whole_of: a long name, `x` or `1e300`
    -- written by hand is none, and goes first); the bucket just counted never goes,
    -- whatever names another node wrote sort after it
    local fields, at, current = redis.call('HKEYS', mk), {}, tostring(minute)
    for _, f in ipairs(fields) do at[f] = whole_of(f) or -1 end
    table.sort(fields, function(a, b) return at[a] < at[b] end)
    local most = math.min(#fields - keep, TRIM_MOST)
    for _, f in ipairs(fields) do
      if #gone == most then break end
      if f ~= current then gone[#gone + 1] = f end
    end
  else
    local seen, spent = {}, 0
    for _ = 1, TRIM_SAMPLE do
      local f = redis.call('HRANDFIELD', mk)
      if not f then break end
      spent = spent + #f
      local m = whole_of(f)
      if not seen[f] and (not m or m <= minute - keep) then
        gone[#gone + 1] = f
        seen[f] = true
      end
      if spent >= TRIM_BYTES then break end
    end
  end
  if #gone > 0 then redis.call('HDEL', mk, unpack(gone)) end
end
