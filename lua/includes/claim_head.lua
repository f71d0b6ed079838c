-- the head of pending or of a lane as a claim reads it, measured first (measured.lua):
-- a ghost (no row), a bad row (refused, nothing written) or the job to serve. Reads only.
--@include reads

-- what a claim reads of a head row, in one HMGET: the whole-number fields (checked
-- before any write), then the payload and the two times its wait is measured from
-- (plain loops: an include's top level reads no global but `redis`, lua/README.md)
local CLAIM_READS, CLAIM_CAPS, N_WHOLES = {}, {}, #ROW_WHOLES
for i = 1, N_WHOLES do CLAIM_READS[i], CLAIM_CAPS[i] = ROW_WHOLES[i][1], WHOLE_DIGITS end
CLAIM_READS[N_WHOLES + 1], CLAIM_READS[N_WHOLES + 2], CLAIM_READS[N_WHOLES + 3] = 'payload', 'created_at', 'due_at'
-- the payload is served whatever its length; a number or a time longer than
-- WHOLE_DIGITS is no whole number, whatever it holds, and is not read
CLAIM_CAPS[N_WHOLES + 1], CLAIM_CAPS[N_WHOLES + 2], CLAIM_CAPS[N_WHOLES + 3] = MAX_WHOLE, WHOLE_DIGITS, WHOLE_DIGITS

-- the bytes a head row may hold for the fields a claim reads to be read in one HMGET
-- once the row is measured whole (measured.lua `over_fields`); a larger row, or one not
-- measured so, has each field measured first
local CLAIM_ROW_BYTES = 65536
-- what a field measured too long reads as: no whole number
local TOO_LONG = 'x'

-- the head row `jk` of member `id` as a claim reads it: false when there is no row (a
-- ghost); else true and the first whole-number field no transition can read (nil when
-- none), and {payload, created_at, due_at} for activate. A key of another type than a
-- hash: for a foreign id (`x:logs`, `x:lock` name job x's list and lock) no job, a
-- ghost; for any other id a row no transition can read ('type')
local function claim_read(jk, id)
  local count = redis.pcall('HLEN', jk)
  if type(count) ~= 'number' then
    if foreign_id(id) then return false end
    return true, 'type'
  end
  -- no key: a ghost (a hash is never empty)
  if count == 0 then return false end
  local over, lengths = over_fields(jk, CLAIM_READS, CLAIM_ROW_BYTES, nil, CLAIM_CAPS, count)
  local vals = within_fields(jk, CLAIM_READS, over, lengths)
  for k in pairs(lengths) do vals[k] = TOO_LONG end
  for i, w in ipairs(ROW_WHOLES) do
    if whole_of(vals[i], w[2]) == nil then return true, w[1] end
  end
  return true, nil, {vals[N_WHOLES + 1], vals[N_WHOLES + 2], vals[N_WHOLES + 3]}
end

-- the head member `id` as a claim reads it (claim_read). An id over MAX_ID bytes is
-- foreign: its row is not read and it is dropped as a ghost is, its row and keys left
-- as they are
local function claim_head(base, id)
  if #id > MAX_ID then return false end
  return claim_read(base .. 'job:' .. id, id)
end

-- what a ghost dropped at the head counts against CLAIM_BYTES: a foreign id's bytes
-- once (read, then ZREM), another's ID_WORK times (its row key, EXISTS, ZREM)
local function head_cost(id)
  if #id > MAX_ID then return foreign_cost(id) end
  return id_cost(id)
end
