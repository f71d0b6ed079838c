-- @read_rows -- the fields a frame shows, for a batch of jobs, each field measured before
-- its bytes are copied; reads only.
--@readonly
-- One call per batch (bounded by the caller's batch size and by ROW_BYTES bytes read)
-- instead of one command per job, so a 100,000-job snapshot is two hundred calls. No
-- field over ARGV[2] bytes is copied, whoever wrote it (a script holds the server about
-- 1.5 ms a megabyte it copies, more for larger ones): a row of at most MEASURED_FIELDS
-- fields is measured whole first (MEMORY USAGE ... SAMPLES 0: every name and value
-- counted, O(its fields)), and one within ARGV[2] is read in one HMGET; any other row
-- (larger, of more fields, a bound under MEASURED_BYTES, or a server or ACL user without
-- MEMORY USAGE, as the embedded fake) has each field asked measured (HSTRLEN). 500
-- ordinary rows of 8 fields, side by side on Valkey: 2.4 to 3.7 ms a call with only the
-- payload measured, x1.2 measured whole (2.8 to 4.5 ms), x2.0 with an HSTRLEN a field.
-- KEYS[1] = the queue base root
-- ARGV[1] = n, the number of fields; ARGV[2] = the longest field read (bytes; ROW_BYTES
--   at most); ARGV[3 .. n+2] = the fields; then the job ids
-- returns one list of n values per id, in the order asked (nil where absent), for the
-- first ids only once their fields reach ROW_BYTES bytes: the caller sends the rest
-- again. A field over ARGV[2] bytes is not read: its value is nil and its row's list
-- holds one value more for each such field, its place among the fields (1 to n), for
-- the caller to read by name or leave. A foreign id (reads.lua `foreign_id`), and a key
-- that is no hash, read as a row with no field.
--@include reads
local base, n = KEYS[1], tonumber(ARGV[1])
-- emq_notebook.defaults.BYTE_BUDGET
local ROW_BYTES = 1048576
-- a row measured whole at most (MEMORY USAGE walks each of its fields)
local MEASURED_FIELDS = 64
-- a smaller bound than this passes no row measured whole (names, values and their
-- allocations): each field is measured instead
local MEASURED_BYTES = 4096
-- what a field may count for less in MEMORY USAGE than its length: a listpack keeps a
-- number of up to 20 digits in 9 bytes
local NUMBER_SLACK = 32
local longest = math.min(tonumber(ARGV[2]), ROW_BYTES)
local fields = {unpack(ARGV, 3, n + 2)}

local function none()
  local row = {}
  for k = 1, n do row[k] = false end
  return row
end

-- true when no field of row `jk` (of `count` fields) can be over `longest`
local function within_whole(jk, count)
  if count > MEASURED_FIELDS or longest < MEASURED_BYTES then return false end
  local size = redis.pcall('MEMORY', 'USAGE', jk, 'SAMPLES', '0')
  return type(size) == 'number' and size + NUMBER_SLACK * count <= longest
end

-- the row's fields, a field over `longest` left out (nil), its place added at the end
local function read(jk)
  local count = redis.pcall('HLEN', jk)
  if type(count) ~= 'number' or count == 0 then return none() end
  if within_whole(jk, count) then return redis.call('HMGET', jk, unpack(fields)) end
  local within, over = {}, {}
  for k = 1, n do
    if redis.call('HSTRLEN', jk, fields[k]) <= longest then
      within[#within + 1] = fields[k]
    else
      over[#over + 1] = k
    end
  end
  if #over == 0 then return redis.call('HMGET', jk, unpack(fields)) end
  local got = #within > 0 and redis.call('HMGET', jk, unpack(within)) or {}
  local row, j, o = {}, 0, 1
  for k = 1, n do
    if k == over[o] then
      row[k], o = false, o + 1
    else
      j = j + 1
      row[k] = got[j]
    end
  end
  for i, k in ipairs(over) do row[n + i] = k end
  return row
end

local out, spent = {}, 0
for i = n + 3, #ARGV do
  if spent >= ROW_BYTES then break end
  local id = ARGV[i]
  local row = foreign_id(id) and none() or read(base .. 'job:' .. id)
  for k = 1, n do
    if row[k] then spent = spent + #row[k] end
  end
  out[#out + 1] = row
end
return out
