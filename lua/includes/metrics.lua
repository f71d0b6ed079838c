-- the throughput record: per-minute buckets, the oldest trimmed past `keep`
local function bump_metric(base, kind, now)
  local mk = base .. 'metrics:' .. kind
  redis.call('HINCRBY', mk, tostring(math.floor(now / 60000)), 1)
  local keep = tonumber(redis.call('HGET', base .. 'meta', 'metrics_keep') or '1440')
  if redis.call('HLEN', mk) > keep then
    local fields = redis.call('HKEYS', mk)
    table.sort(fields, function(a, b) return tonumber(a) < tonumber(b) end)
    for i = 1, #fields - keep do redis.call('HDEL', mk, fields[i]) end
  end
end
