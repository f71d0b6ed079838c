-- @read_rows -- the fields a frame shows, for a batch of jobs, each field measured before
-- its bytes are copied; reads only.
--@readonly
-- One call per batch (bounded by the caller's batch size and by ROW_BYTES bytes copied)
-- instead of one command per job, so a 100,000-job snapshot is two hundred calls. No
-- field over ARGV[2] bytes is copied, whoever wrote it, nor more than ROW_BYTES in all,
-- whatever a row holds: each row is measured first (measured.lua `measured_row`).
-- KEYS[1] = the queue base root
-- ARGV[1] = n, the number of fields; ARGV[2] = the longest field read (bytes; ROW_BYTES
--   at most); ARGV[3 .. n+2] = the fields; then the job ids
-- returns one list of n values per id, in the order asked (nil where absent), for the
-- first ids only: a row whose fields within ARGV[2] would take the call past ROW_BYTES
-- bytes ends it before that row, and the caller sends the rest again. A field over
-- ARGV[2] bytes is not read: its value is nil and its row's list holds one value more
-- for each such field, its place among the fields (1 to n), for the caller to read by
-- name or leave. The call's first row is read as far as ROW_BYTES go: each field, in
-- order, while it fits what is left; one that does not is answered by its place as if
-- it were over ARGV[2]. A foreign id (ids.lua `foreign_id`), and a key that is no
-- hash, read as a row with no field.
--@include reads
local base, n = KEYS[1], tonumber(ARGV[1])
-- emq_notebook.defaults.BYTE_BUDGET
local ROW_BYTES = 1048576
local longest = math.min(tonumber(ARGV[2]), ROW_BYTES)
local fields = {unpack(ARGV, 3, n + 2)}

local function none()
  local row = {}
  for k = 1, n do row[k] = false end
  return row
end

-- the row's fields, a field over `longest` left out (false), its place added at the end;
-- false, nothing read, when its fields within `longest` hold more than `left` bytes,
-- unless it is the call's `first` row: then those that fit are read, in order, and the
-- others left out as over it
local function read(jk, left, first)
  local row, over = measured_row(jk, fields, longest, left, first)
  if row == false then return false end
  if not row then return none() end
  for i, k in ipairs(over) do row[n + i] = k end
  return row
end

local out, spent = {}, 0
for i = n + 3, #ARGV do
  if spent >= ROW_BYTES then break end
  local id = ARGV[i]
  local row = foreign_id(id) and none() or read(base .. 'job:' .. id, ROW_BYTES - spent, #out == 0)
  if not row then break end
  for k = 1, n do
    if row[k] then spent = spent + #row[k] end
  end
  out[#out + 1] = row
end
return out
