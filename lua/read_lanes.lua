-- @read_lanes -- a page of a queue's lanes, by name or with each lane's backlog and bookkeeping; reads only.
--@readonly
-- A listing's page (lanes.lanes, the Lanes tab, a completion of lane names): the set
-- of known groups is walked by SSCAN a chunk at a time (includes/chunks.lua), so a
-- queue of 1,000,000 lanes, or lane names another node made 1 MB long, costs a call
-- about ARGV[2] lanes and ARGV[3] bytes, not the whole set. A lane's limit and active count are measured (HSTRLEN)
-- before they are read: another node may have written anything there.
-- KEYS[1] = the queue base root
-- ARGV[1] = the SSCAN cursor of the groups set ('0': the start); ARGV[2] = lanes
--   examined at most; ARGV[3] = bytes at most (a name answered counts its bytes, and
--   ID_WORK times when keys are built of it); ARGV[4] = '1' to answer each lane's
--   counts, '' its name only; ARGV[5] = the prefix a name answered starts with ('': any)
-- returns {cursor, examined, skipped, lane, ...}: the cursor to go on from ('0': every
-- lane walked), the lanes examined (ARGV[2], and the rest of the chunk in hand), the
-- lanes left out for a name over MAX_ID bytes (no key is built of it, no name
-- answered), then each lane whose name starts with ARGV[5]: its name, or with ARGV[4]
-- five values, {name, pending, limit, active, paused}: pending its backlog's ZCARD
-- (nil for a key that is no sorted set); limit and active as the meta holds them (nil
-- where absent or the meta is no hash; a number, the field's length, over LANE_FIELD
-- bytes: no whole number is that long); paused 1 or 0. A walk may meet a lane twice
-- when the set shrinks between calls (only an obliterate takes lanes out). A groups key
-- that is no set is walked as an empty one.
--@include reads
local base = KEYS[1]
local most, bytes, counted, prefix = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4] == '1', ARGV[5]
-- the longest limit or active count read: a whole number is 19 digits at most
local LANE_FIELD = 32
local skipped, out = 0, {}

-- the meta's limit and active count, each measured first
local function bookkeeping(mk)
  local sizes = {}
  for i, f in ipairs({'limit', 'active'}) do
    local size = redis.pcall('HSTRLEN', mk, f)
    if type(size) ~= 'number' then return false, false end
    sizes[i] = size
  end
  if sizes[1] <= LANE_FIELD and sizes[2] <= LANE_FIELD then
    local got = redis.call('HMGET', mk, 'limit', 'active')
    return got[1], got[2]
  end
  local got = {}
  for i, f in ipairs({'limit', 'active'}) do
    if sizes[i] > LANE_FIELD then got[i] = sizes[i] else got[i] = redis.call('HGET', mk, f) end
  end
  return got[1], got[2]
end

local cursor, examined = each_lane(base .. 'groups', ARGV[1], most, bytes, function(g)
  if prefix ~= '' and string.sub(g, 1, #prefix) ~= prefix then return #g end
  if foreign_lane(g) then
    skipped = skipped + 1
    return #g
  end
  out[#out + 1] = g
  if not counted then return #g end
  local pending = redis.pcall('ZCARD', lane_pending(base, g))
  out[#out + 1] = type(pending) == 'number' and pending or false
  local mk = lane_meta(base, g)
  local limit, active = bookkeeping(mk)
  local paused = redis.pcall('HEXISTS', mk, 'paused')
  out[#out + 1] = limit or false
  out[#out + 1] = active or false
  out[#out + 1] = paused == 1 and 1 or 0
  return #g + id_cost(g)
end)
local head = {cursor, examined, skipped}
for i = 1, #out do head[#head + 1] = out[i] end
return head
