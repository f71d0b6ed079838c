-- the throughput record: per-minute buckets, the oldest trimmed past `keep`

-- how many buckets a metrics hash keeps (meta `metrics_keep`, default 1440), or
-- nil when the field holds no whole number >= 1: checked before a script writes
local function metrics_keep(base)
  local keep = whole_of(redis.call('HGET', base .. 'meta', 'metrics_keep'), 1440)
  if keep and keep >= 1 then return keep end
  return nil
end

local function bump_metric(base, kind, now)
  local mk = base .. 'metrics:' .. kind
  redis.call('HINCRBY', mk, tostring(math.floor(now / 60000)), 1)
  local keep = metrics_keep(base) or 1440
  if redis.call('HLEN', mk) > keep then
    local fields = redis.call('HKEYS', mk)
    -- a field that is not a bucket number (written by hand) sorts first and goes first
    table.sort(fields, function(a, b) return (tonumber(a) or -1) < (tonumber(b) or -1) end)
    for i = 1, #fields - keep do redis.call('HDEL', mk, fields[i]) end
  end
end
