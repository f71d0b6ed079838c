-- the walk of a queue's lanes (emq:{q}:groups, the set of known groups; lanes.lua
-- describes the lanes) in bounded calls: SSCAN from a cursor a chunk at a time, each
-- lane's name handed to a visit. Reads only.
--@include reads

-- lanes read at once: a name is counted only once it is read (no command gives a set
-- member's length), so a step asks SSCAN for one lane first, then twice as many a
-- chunk up to LANE_CHUNK, and never more than the bytes left cover at the longest
-- name yet: a call reads at most its byte budget plus one chunk. SSCAN answers whole
-- buckets, so a chunk may hold a bucket's lanes more than it asked (Valkey 8.1 on keeps
-- up to 7 in a bucket, and a full bucket chains another), and a small set kept as a
-- listpack (128 names of 64 bytes at most) answers whole at once
local LANE_CHUNK = 8

-- the bytes a lane's name counts for when keys are built of it (its backlog, its
-- meta): hashed and copied at each, as a bulk move counts an id (reads.lua `ID_WORK`)
local function lane_cost(g) return #g * ID_WORK end

-- true for a lane no key is built of: a name over MAX_ID bytes (reads.lua `foreign_id`'s
-- bound), which only another node writes (the toolkit's name gate refuses it); a key of
-- a 1 MB name is hashed and copied at each command that names it
local function foreign_lane(g) return #g > MAX_ID end

-- The lanes of set `groups` from SSCAN cursor `cursor` ('0': the start), each handed to
-- visit(g), which answers the bytes it read, built or answers. A step ends once `most`
-- lanes are examined or `bytes` are spent, after the chunk in hand (a cursor can not
-- stop inside one), and after `most` SSCAN calls (a sparse set's calls may find no
-- lane). Answers the cursor to go on from ('0': the walk is done), the lanes examined
-- and the bytes spent. A key that is no set is walked as an empty one.
local function each_lane(groups, cursor, most, bytes, visit)
  local n, spent, longest, chunk, calls = 0, 0, 0, 1, 0
  repeat
    local want = math.max(1, math.min(chunk, most - n))
    if longest > 0 then
      want = math.min(want, math.max(1, math.floor((bytes - spent) / (longest * ID_WORK))))
    end
    chunk = math.min(2 * chunk, LANE_CHUNK)
    local page = redis.pcall('SSCAN', groups, cursor, 'COUNT', want)
    if page.err then return '0', n, spent end
    cursor, calls = page[1], calls + 1
    for _, g in ipairs(page[2]) do
      n = n + 1
      if #g > longest then longest = #g end
      spent = spent + visit(g)
    end
  until cursor == '0' or n >= most or spent >= bytes or calls >= most
  return cursor, n, spent
end
