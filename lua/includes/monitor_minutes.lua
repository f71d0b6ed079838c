-- what a scrape reads of a queue beside its health (@read_monitor, @read_watch): the
-- throughput and latency of the minutes asked, and when the oldest dead job died.
--@include reads
--@include ends

-- emq_notebook/monitor.py CATCH_UP_MINUTES and the minutes around it
local MONITOR_MINUTES = 64

-- {oldest, completed, failed, wait, run} of the queue at `base` for the minutes `first`
-- to `last` (whole numbers, at most MONITOR_MINUTES apart; else false), as @read_monitor's
-- header says: `measured_only` true to read only what was measured first, `fields_most`
-- the most fields of a latency hash read, `bytes_most` the most bytes of a latency hash
-- or of the dead set's head read
local function monitor_minutes(base, first, last, measured_only, fields_most, bytes_most)
  if not first or not last or last < first or last - first > MONITOR_MINUTES then return false end

  -- the count of each minute of metrics hash `kind`, each field measured before it is read
  local function counts(kind)
    local key, out = base .. 'metrics:' .. kind, {}
    for minute = first, last do
      local field = string.format('%d', minute)
      local size, n = redis.pcall('HSTRLEN', key, field), -1
      if size == 0 then
        n = 0
      elseif type(size) == 'number' and size <= WHOLE_DIGITS then
        n = math.max(whole_of(redis.call('HGET', key, field)) or -1, -1)
      end
      out[#out + 1] = n
    end
    return out
  end

  -- the minutes of the latency index from `first` to `last` (at most one a minute: more
  -- members in the range are another node's, left unread)
  local index = base .. 'lat:minutes'
  local listed = redis.pcall('ZRANGEBYSCORE', index, first, last, 'LIMIT', 0, last - first + 1)
  if type(listed) ~= 'table' or listed.err then listed = {} end

  -- each listed minute's `kind` histogram: {minute, buckets or -1, ...}
  local function histograms(kind)
    local out = {}
    for _, m in ipairs(listed) do
      local minute = whole_of(m)
      if minute and minute >= first and minute <= last then
        local key = base .. 'lat:' .. kind .. ':' .. m
        local n = redis.pcall('HLEN', key)
        local buckets = -1
        if n == 0 then
          buckets = {}
        elseif type(n) == 'number' and n <= fields_most then
          local size = redis.pcall('MEMORY', 'USAGE', key, 'SAMPLES', '0')
          if type(size) == 'number' and size <= bytes_most or (type(size) ~= 'number' and not measured_only) then
            buckets = redis.call('HGETALL', key)
          end
        end
        out[#out + 1], out[#out + 2] = minute, buckets
      end
    end
    return out
  end

  -- when the oldest dead job died: the head's score when its member may be read, else
  -- found by ZCOUNTs (`bottom_score`)
  local oldest = false
  local dead = probe(base .. 'dead', bytes_most, measured_only)
  if dead.n > 0 then
    if readable_at(dead, 0) then
      local score = tonumber(redis.call('ZRANGE', dead.key, 0, 0, 'WITHSCORES')[2])
      if score and score == score and score >= -SCORE_SPAN and score <= SCORE_SPAN then
        oldest = math.floor(score)
      end
    elseif searchable(dead) then
      oldest = bottom_score(dead.key) or false
    end
  end
  return {oldest, counts('completed'), counts('failed'), histograms('wait'), histograms('run')}
end
