-- @read_whole_rows -- every field of a batch of job rows, each measured before its bytes
-- are copied; reads only (extension: what an export writes and a move carries).
--@readonly
-- A row is read whole (one HGETALL) only when one MEMORY USAGE measures it, names and
-- values, within the call's bytes left (as measured.lua `row_within`: a row of at most
-- MEASURED_FIELDS fields), or, with ARGV[3], where no MEMORY USAGE answers (the
-- in-process server no other client shares). Any other row is read by the names the
-- caller sends, each field measured (HSTRLEN) first, and its field count tells the
-- caller whether it holds others.
-- KEYS[1] = the queue base root
-- ARGV[1] = bytes at most; ARGV[2] = the longest field read here (bytes); ARGV[3] = '1'
--   to list a row's names unmeasured where MEMORY USAGE is not there, else ''; ARGV[4] =
--   n; ARGV[5 .. n+4] = the names read of a row not listed; then the ids
-- returns one reply per id, for the first ids (the call ends once its bytes are spent,
-- after one id at least: the caller sends the rest again): -1 for no row; 0 for a key of
-- another type; else {field count, 1 when every name is listed (else 0), name, value,
-- ...}: a value is the field's bytes, or its length (a number) when over ARGV[2] or past
-- the call's bytes (the call's first field within ARGV[2] is always read)
--@include reads
local base, bytes, longest = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2])
local unmeasured, n = ARGV[3] == '1', tonumber(ARGV[4])
local known = {unpack(ARGV, 5, n + 4)}
local out, spent = {}, 0

-- row `jk` of `count` fields whole, by one HGETALL, when one MEMORY USAGE measures it
-- within the call's bytes (or, with ARGV[3], where none answers): its name/value pairs;
-- nil when it is read by names instead; false when it would take the call past its
-- bytes (not the call's first row: the caller sends it again)
local function whole_row(jk, count)
  if count > MEASURED_FIELDS then return nil end
  local size = redis.pcall('MEMORY', 'USAGE', jk, 'SAMPLES', '0')
  if type(size) ~= 'number' then
    if unmeasured then return redis.call('HGETALL', jk) end
    return nil
  end
  size = size + NUMBER_SLACK * count
  if size > bytes then return nil end
  if #out > 0 and spent + size > bytes then return false end
  spent = spent + size
  return redis.call('HGETALL', jk)
end

-- row `jk` read by the names the caller sent, each measured before it is read: the
-- pairs of those it holds, a value over `longest` or past the call's bytes as its length
local function named_row(jk)
  local pairs_ = {}
  for _, name in ipairs(known) do
    local size = redis.call('HSTRLEN', jk, name)
    local value = size
    spent = spent + #name
    if size <= longest and (spent + size <= bytes or (#out == 0 and #pairs_ == 0)) then
      value = redis.call('HGET', jk, name)
      if value then spent = spent + size end
    end
    if value then
      pairs_[#pairs_ + 1] = name
      pairs_[#pairs_ + 1] = value
    end
  end
  return pairs_
end

for i = n + 5, #ARGV do
  if spent >= bytes and #out > 0 then break end
  local jk = base .. 'job:' .. ARGV[i]
  local count = redis.pcall('HLEN', jk)
  if type(count) ~= 'number' then
    out[#out + 1] = 0
  elseif count == 0 then
    out[#out + 1] = -1
  else
    local whole = whole_row(jk, count)
    if whole == false then break end
    local row = {count, whole and 1 or 0}
    for _, v in ipairs(whole or named_row(jk)) do row[#row + 1] = v end
    out[#out + 1] = row
  end
end
return out
