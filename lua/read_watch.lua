-- @read_watch -- all a watching look reads of one queue in one call: its counts, a step of its lanes' backlog and, for health, the last minutes' work, the ends of its sets and a sample of rows' times; reads only.
--@readonly
-- KEYS[1] = the queue base root
-- ARGV[1] = the time now (ms; '' for the server's clock); ARGV[2] = the SSCAN cursor a
--   step of the lanes' backlog goes on from ('': no step); ARGV[3] = lanes that step
--   examines at most; ARGV[4] = bytes a walk of the lanes spends at most; ARGV[5] = '1' for
--   health's reads too ('': the counts only); ARGV[6] = the window (ms); ARGV[7] = how
--   long past its due time a scheduled job is overdue (ms); ARGV[8] = the longest member
--   read (bytes); ARGV[9] = '1' to read only members measured within it (a server);
--   ARGV[10] = lane heads sampled at most; ARGV[11] = lanes examined for them; ARGV[12] =
--   the longest time field read (bytes); ARGV[13] = the most fields of a hash read whole;
--   ARGV[14..17] (optional, a scrape's) = the first and last minute, the most fields and
--   bytes of a latency hash read: @read_monitor's ARGV[1], [2], [4], [5]
-- returns {now, counts, step, health, scraped}: counts {pending, active, schedule, dead, paused,
--   lanes, repeatables, meta}, each nil for a key of another type (meta 1 when the meta
--   hash is there); step the lanes' step as @lane_backlog answers it ({}: none); health
--   ({}: the counts only) {claimed, completed, failed: the window's sums; waits: each
--   minute's wait histogram as HGETALL answers it (one over ARGV[13] fields left unread);
--   expired: active members past their lease; ends: as @read_ends answers ({} for a queue
--   with no job in its sets); heads: as @lane_backlog answers from the set's start with
--   heads ({}: no lane); times: {created_at, due_at} of each sampled row (the head, the
--   band, the lanes' heads), nil where absent or over ARGV[12] bytes; last_claim: the
--   latest minute with a claim, and created: the meta's created_at, both nil unless
--   nothing was claimed in the window and there is work}. A claim further back than a
--   day in a hash of more than ARGV[13] minutes answers the day's bound. scraped: as
--   @read_monitor answers (false for minutes past its bound), with ARGV[14..17] only.
--@include queue_ends
--@include lane_sum
--@include monitor_minutes
local base, bytes = KEYS[1], tonumber(ARGV[4])
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- a count, false for a key of another type (another client's)
local function count(...)
  local n = redis.pcall(...)
  if type(n) == 'number' then return n end
  return false
end

local counts = {count('ZCARD', base .. 'pending'), count('ZCARD', base .. 'active'),
  count('ZCARD', base .. 'schedule'), count('ZCARD', base .. 'dead'),
  count('HEXISTS', base .. 'meta', 'paused'), count('SCARD', base .. 'groups'),
  count('ZCARD', base .. 'repeat'), redis.call('EXISTS', base .. 'meta')}
local lanes = counts[6] or 0
local step = {}
if ARGV[2] ~= '' and lanes > 0 then step = lane_sum(base, ARGV[2], tonumber(ARGV[3]), bytes, 0) end
if ARGV[5] ~= '1' then return {now, counts, step, {}} end

local longest, measured_only = tonumber(ARGV[8]), ARGV[9] == '1'
local time_bytes, most_fields = tonumber(ARGV[12]), tonumber(ARGV[13])
local first, last = math.floor((now - tonumber(ARGV[6])) / 60000), math.floor(now / 60000)
local minutes = {}
for m = first, last do minutes[#minutes + 1] = string.format('%d', m) end

-- a whole number as the toolkit writes one (ASCII digits); nil for what another node wrote
local function digits(v)
  if type(v) == 'string' and #v <= 19 and string.find(v, '^%d+$') then return tonumber(v) end
  return nil
end

-- the window's sum of one metrics hash (0 for a key of another type)
local function window(kind)
  local got = redis.pcall('HMGET', base .. 'metrics:' .. kind, unpack(minutes))
  local sum = 0
  if got.err then return 0 end
  for i = 1, #minutes do sum = sum + (digits(got[i]) or 0) end
  return sum
end

-- the latest minute before the window with a claim: an hour of minutes an HMGET, back a
-- day (a queue quiet for minutes costs one), then the hash's names when there are at
-- most `most_fields` of them; else the day's bound. false when it holds none
local function last_claim(key)
  local n = redis.pcall('HLEN', key)
  if type(n) ~= 'number' or n == 0 then return false end
  local top = first - 1
  for _ = 1, 24 do
    local asked = {}
    for m = top, top - 59, -1 do asked[#asked + 1] = string.format('%d', m) end
    local got = redis.call('HMGET', key, unpack(asked))
    for i = 1, 60 do
      if got[i] then return asked[i] end
    end
    top = top - 60
  end
  if n > most_fields then return string.format('%d', top) end
  local latest = false
  for _, m in ipairs(redis.call('HKEYS', key)) do
    local v = digits(m)
    if v and (not latest or v > latest) then latest = v end
  end
  return latest and string.format('%d', latest)
end

-- a field of a hash within `time_bytes`, else false
local function time_field(key, field)
  local n = redis.pcall('HSTRLEN', key, field)
  if type(n) == 'number' and n > 0 and n <= time_bytes then return redis.call('HGET', key, field) end
  return false
end

local waits = {}
local index = redis.pcall('ZRANGEBYSCORE', base .. 'lat:minutes', first, last, 'LIMIT', 0, #minutes)
if not index.err then
  for _, m in ipairs(index) do
    local key = base .. 'lat:wait:' .. m
    local n = #m <= 20 and redis.pcall('HLEN', key)
    if type(n) == 'number' and n > 0 and n <= most_fields then waits[#waits + 1] = redis.call('HGETALL', key) end
  end
end
local expired = count('ZCOUNT', base .. 'active', '-inf', now) or 0
local ends = {}
if (counts[1] or 0) + (counts[3] or 0) + (counts[4] or 0) > 0 then
  ends = queue_ends(base, now - tonumber(ARGV[7]), longest, measured_only, now)
end
local heads = {}
if lanes > 0 then heads = lane_sum(base, '0', tonumber(ARGV[11]), bytes, tonumber(ARGV[10]), longest, measured_only) end

-- the sample's rows: pending's head and band, the lanes' heads (each read once)
local times, seen = {}, {}
local sample = {ends[1], ends[2]}
for i = 5, #heads do sample[#sample + 1] = heads[i] end
for _, id in ipairs(sample) do
  if type(id) == 'string' and not seen[id] then
    seen[id] = true
    local jk = base .. 'job:' .. id
    local foreign = foreign_id(id)
    times[#times + 1] = {not foreign and time_field(jk, 'created_at'), not foreign and time_field(jk, 'due_at')}
  end
end

local claimed = window('claimed')
local quiet, created = false, false
if claimed == 0 and ((counts[1] or 0) > 0 or lanes > 0 or (ends[3] or 0) > 0 or expired > 0) then
  quiet = last_claim(base .. 'metrics:claimed')
  created = time_field(base .. 'meta', 'created_at')
end
local scraped = ARGV[14] and monitor_minutes(base, whole_of(ARGV[14]), whole_of(ARGV[15]), measured_only,
  tonumber(ARGV[16]), tonumber(ARGV[17]))
return {now, counts, step, {claimed, window('completed'), window('failed'), waits, expired, ends, heads,
  times, quiet, created}, scraped}
