-- @read_rows -- the fields a frame shows, for a batch of jobs; reads only.
--@readonly
-- One call per batch (bounded by the caller's batch size and by ROW_BYTES bytes read)
-- instead of one command per job, so a 100,000-job snapshot is two hundred calls.
-- KEYS[1] = the queue base root
-- ARGV[1] = n, the number of fields; ARGV[2 .. n+1] = the fields; then the job ids
-- returns one list of n values per id, in the order asked (nil where absent), for
-- the first ids only once their fields reach ROW_BYTES bytes: the caller sends the
-- rest again. A payload over ROW_BYTES bytes is not read here (a script holds the
-- server about a millisecond a megabyte it reads): its value is nil and its row's list
-- holds one value more, the payload's place among the fields, for the caller to read
-- with a plain HGET. A foreign id (reads.lua `foreign_id`), and a key that is no
-- hash, read as a row with no field.
--@include reads
local base, n = KEYS[1], tonumber(ARGV[1])
-- emq_notebook.defaults.BYTE_BUDGET
local ROW_BYTES = 1048576
local fields = {unpack(ARGV, 2, n + 1)}
local others, payload_at = {}, nil
for k = 1, n do
  if fields[k] == 'payload' then payload_at = k else others[#others + 1] = fields[k] end
end

local function none()
  local row = {}
  for k = 1, n do row[k] = false end
  return row
end

-- the row's fields, with the payload left out when it is over ROW_BYTES
local function read(jk)
  if not payload_at then
    local row = redis.pcall('HMGET', jk, unpack(fields))
    return row.err and none() or row
  end
  local size = redis.pcall('HSTRLEN', jk, 'payload')
  if type(size) ~= 'number' then return none() end
  if size <= ROW_BYTES then return redis.call('HMGET', jk, unpack(fields)) end
  local got = #others > 0 and redis.call('HMGET', jk, unpack(others)) or {}
  local row, j = {}, 0
  for k = 1, n do
    if k == payload_at then
      row[k] = false
    else
      j = j + 1
      row[k] = got[j]
    end
  end
  row[n + 1] = payload_at
  return row
end

local out, spent = {}, 0
for i = n + 2, #ARGV do
  if spent >= ROW_BYTES then break end
  local id = ARGV[i]
  local row = foreign_id(id) and none() or read(base .. 'job:' .. id)
  for k = 1, n do
    if row[k] then spent = spent + #row[k] end
  end
  out[#out + 1] = row
end
return out
