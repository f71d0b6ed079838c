-- Measure, then read: the one door foreign data comes in by. Any node's worker may
-- write a row's field of any size (a last_error, a progress), so no field is copied
-- before it is measured: a row of at most MEASURED_FIELDS fields is measured whole
-- (MEMORY USAGE ... SAMPLES 0: names and values counted, O(its fields), no byte
-- copied) when at least MEASURED_FROM fields are asked; any other row (larger, of more
-- fields, a bound under MEASURED_BYTES, or a server or ACL user without MEMORY USAGE,
-- as the embedded fake) has each field asked measured (HSTRLEN). A field over its
-- bound is refused or passed over by the caller, never read. Reads only.

local MEASURED_FIELDS = 64
-- a smaller bound than this passes no row measured whole: each field is measured instead
local MEASURED_BYTES = 4096
-- what a field may count for less in MEMORY USAGE than its length: a listpack keeps a
-- number of up to 20 digits in 9 bytes
local NUMBER_SLACK = 32
-- fewer fields asked are each measured (an HSTRLEN each costs less than a whole measure)
local MEASURED_FROM = 3

-- the bytes row `jk` (of `count` fields) holds at most, names and values all told, by one
-- MEMORY USAGE when that is at most `bytes`; nil over it, and where MEMORY USAGE is not
-- answered
local function row_within(jk, count, bytes)
  local size = redis.pcall('MEMORY', 'USAGE', jk, 'SAMPLES', '0')
  if type(size) ~= 'number' then return nil end
  size = size + NUMBER_SLACK * count
  if size > bytes then return nil end
  return size
end

-- the bytes row `jk` (of `count` fields) holds at most when no field of it can be over
-- `longest` (`row_within`); nil when it is not measured so
local function within_whole(jk, count, longest)
  if count > MEASURED_FIELDS or longest < MEASURED_BYTES then return nil end
  return row_within(jk, count, longest)
end

-- the fields of `fields` (one at least) over `longest` bytes in row `jk` (field k over
-- caps[k] when `caps` names one: the longest value its reader can use), measured before
-- any is read: their places and their lengths by place; then the bytes the others hold
-- at most, and their lengths by place. A row measured whole answers its figure and no
-- lengths, unless that is over `left` (optional): then each field is measured. A field
-- over its cap in a row measured whole is read (the row holds at most `longest` bytes).
-- `count` (optional): the row's HLEN, when the caller asked it. nil for a key that is
-- no hash (and, when the row is measured whole, for no key)
local function over_fields(jk, fields, longest, left, caps, count)
  local n = #fields
  if n >= MEASURED_FROM then
    count = count or redis.pcall('HLEN', jk)
    if type(count) ~= 'number' or count == 0 then return nil end
    local size = within_whole(jk, count, longest)
    if size and not (left and size > left) then return {}, {}, size end
  end
  local over, lengths, within, sizes = {}, {}, 0, {}
  for k = 1, n do
    local size = redis.pcall('HSTRLEN', jk, fields[k])
    if type(size) ~= 'number' then return nil end
    if size > (caps and caps[k] or longest) then
      over[#over + 1], lengths[k] = k, size
    else
      within, sizes[k] = within + size, size
    end
  end
  return over, lengths, within, sizes
end

-- a row measured field by field narrowed to `left` bytes: each field within, in order,
-- kept while it fits what is left, any other added to those over (its length by place
-- in `lengths`). Answers the places over, in order
local function fitted(n, lengths, sizes, left)
  local over = {}
  for k = 1, n do
    local size = sizes[k]
    if size and size <= left then
      left = left - size
    elseif size then
      lengths[k] = size
    end
    if lengths[k] then over[#over + 1] = k end
  end
  return over
end

-- fields `fields` of row `jk` measured by `over_fields`, those over the bound left out:
-- the values in their order, false where absent or not read
local function within_fields(jk, fields, over, lengths)
  if #over == 0 then return redis.call('HMGET', jk, unpack(fields)) end
  local within = {}
  for k = 1, #fields do
    if not lengths[k] then within[#within + 1] = fields[k] end
  end
  local got = #within > 0 and redis.call('HMGET', jk, unpack(within)) or {}
  local row, j = {}, 0
  for k = 1, #fields do
    if lengths[k] then
      row[k] = false
    else
      j = j + 1
      row[k] = got[j]
    end
  end
  return row
end

-- fields `fields` (one at least) of row `jk`, none over `longest` bytes copied and at
-- most `left` bytes in all (a row measured whole counts as its figure): the values in
-- their order (false where absent or not read), the places of those not read and their
-- lengths by place. A row whose fields within `longest` hold more than `left` is not
-- read (false), or, when `partial`, narrowed to it (`fitted`; true last). nil for a key
-- that is no hash (and, when the row is measured whole, for no key)
local function measured_row(jk, fields, longest, left, partial)
  local over, lengths, within, sizes = over_fields(jk, fields, longest, left)
  if not over then return nil end
  local narrowed = within > left
  if narrowed then
    if not partial then return false end
    over = fitted(#fields, lengths, sizes, left)
  end
  return within_fields(jk, fields, over, lengths), over, lengths, narrowed
end
