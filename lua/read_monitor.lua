-- @read_monitor -- what a scrape reads of a queue beside its health: the throughput and latency of the minutes asked, and when the oldest dead job died; reads only.
--@readonly
-- One call a queue a scrape (emq_notebook/monitor.py) sends in place of an HMGET a metrics
-- hash, a ZRANGEBYSCORE of the latency index, an HGETALL a latency hash and a read of the
-- dead set's head. Nothing is copied unmeasured: a count is read only when HSTRLEN says
-- it is a whole number's length; a latency hash only when it holds at most ARGV[4]
-- fields (HLEN) and, where MEMORY USAGE answers, measures within ARGV[5] bytes; the dead
-- set's head only when measured within ARGV[5] (includes/ends.lua), else its score is
-- found by ZCOUNTs, its member never read.
-- KEYS[1] = the queue base root
-- ARGV[1] = the first minute; ARGV[2] = the last minute (at most MONITOR_MINUTES
--   after the first); ARGV[3] = '1' to read only what was measured first (a server), ''
--   where nothing can be measured (the embedded fake: no MEMORY command); ARGV[4] = the
--   most fields of a latency hash read; ARGV[5] = the most bytes of a latency hash or
--   of the dead set's head read
-- returns {oldest, completed, failed, wait, run}: oldest when the oldest dead job died
-- (the dead set's lowest score, whole ms), nil when none, past 2^53 or of another type;
-- completed and failed the count of each minute asked, in order (0 where none, -1 where
-- the field holds no whole count or the key is no hash); wait and run {minute, buckets,
-- ...} for each minute asked that the latency index holds, buckets a list {bucket,
-- count, ...} as the hash holds them, or -1 for a hash not read (over ARGV[4] fields or
-- ARGV[5] bytes, or no hash).
--@include reads
--@include ends
local base = KEYS[1]
local first, last = whole_of(ARGV[1]), whole_of(ARGV[2])
local measured_only, fields_most, bytes_most = ARGV[3] == '1', tonumber(ARGV[4]), tonumber(ARGV[5])
-- emq_notebook/monitor.py CATCH_UP_MINUTES and the minutes around it
local MONITOR_MINUTES = 64
if not first or not last or last < first or last - first > MONITOR_MINUTES then
  return redis.error_reply('ERR read_monitor: minutes ' .. tostring(ARGV[1]) .. ' to ' .. tostring(ARGV[2]))
end

-- the count of each minute of metrics hash `kind`, each field measured before it is read
local function counts(kind)
  local key, out = base .. 'metrics:' .. kind, {}
  for minute = first, last do
    local field = string.format('%d', minute)
    local size = redis.pcall('HSTRLEN', key, field)
    local n = -1
    if type(size) == 'number' then
      if size == 0 then
        n = 0
      elseif size <= WHOLE_DIGITS then
        n = whole_of(redis.call('HGET', key, field)) or -1
        if n < 0 then n = -1 end
      end
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
      out[#out + 1] = minute
      out[#out + 1] = buckets
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
