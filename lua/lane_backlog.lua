-- @lane_backlog -- the lanes' backlog summed a page of lanes at a time; reads only.
--@readonly
-- A count's step (frames.counts, admin.backlog, a watching look, health's lane sample):
-- the set of known groups is walked by SSCAN a chunk at a time (includes/lane_walk.lua),
-- each lane's backlog counted by one ZCARD, so a queue of 100,000 lanes costs a call
-- about ARGV[2] lanes and ARGV[3] bytes, not the whole set (one SMEMBERS of 100,000
-- lanes held Valkey 18.9 ms, and a ZCARD a lane from the client is 100,000 commands).
-- KEYS[1] = the queue base root
-- ARGV[1] = the SSCAN cursor of the groups set ('0': the start); ARGV[2] = lanes
--   examined at most; ARGV[3] = bytes at most (a lane's name counts ID_WORK times: a
--   key is built of it; a head id once); ARGV[4] = heads at most: the first job of each
--   of the first so many lanes with a backlog; ARGV[5] = the longest head read (bytes;
--   lanes.HEAD_BYTES; optional: none, every head read); ARGV[6] = '1' to read only heads
--   measured within ARGV[5] (a server), '' the ones that can not be measured too (the
--   embedded fake: no MEMORY command)
-- returns {cursor, examined, jobs, skipped, head, head, ...}: the cursor to go on from
-- ('0': every lane walked), the lanes examined (ARGV[2], and the rest of the chunk in
-- hand), the jobs waiting in them, the lanes skipped uncounted (a name over MAX_ID
-- bytes, of which no key is built, or a backlog key that is no sorted set), then the
-- heads' ids; a head not read (over ARGV[5] bytes as measured first, includes/ends.lua
-- `readable_at`: another node's id of 30 MB held Valkey 50 ms read here) stands as its
-- bytes, a number (-1: not measurable). A walk may meet a lane twice when the set
-- shrinks between calls (only an obliterate takes lanes out). A groups key that is no
-- set is walked as an empty one.
--@include lane_walk
--@include ends
local base = KEYS[1]
local most, bytes, want = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local longest, measured_only = tonumber(ARGV[5] or ''), ARGV[6] == '1'
local jobs, skipped, heads = 0, 0, {}
local cursor, examined = each_lane(base .. 'groups', ARGV[1], most, bytes, function(g)
  if foreign_lane(g) then
    skipped = skipped + 1
    return #g
  end
  local key = lane_pending(base, g)
  local n = redis.pcall('ZCARD', key)
  if type(n) ~= 'number' then
    skipped = skipped + 1
    return lane_cost(g)
  end
  jobs = jobs + n
  if n > 0 and #heads < want then
    if longest then
      local ok, size = readable_at(probe(key, longest, measured_only, n), 0)
      if not ok then
        heads[#heads + 1] = size
        return lane_cost(g)
      end
    end
    local head = redis.call('ZRANGE', key, 0, 0)[1]
    heads[#heads + 1] = head
    return lane_cost(g) + #head
  end
  return lane_cost(g)
end)
local out = {cursor, examined, jobs, skipped}
for _, h in ipairs(heads) do out[#out + 1] = h end
return out
