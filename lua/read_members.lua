-- @read_members -- a page of a sorted set's members and their scores; reads only.
--@readonly
-- A frame's page of ids, a completion's: the set is read in chunks (includes/chunks.lua
-- each_member), so a page that meets ids another node made long copies about ARGV[4]
-- bytes of them and one chunk more, not its count of them.
-- KEYS[1] = the queue base root
-- ARGV[1] = the sorted set, its name under the root (`dead`, `lane:acme`); ARGV[2] = the
--   first rank (0-based); ARGV[3] = members at most; ARGV[4] = bytes at most
-- returns {member, score, member, score, ...} in set order from that rank: ARGV[3] of
-- them, or fewer where the set ends or once their bytes reach ARGV[4] (one at least)
--@include reads
local set = KEYS[1] .. ARGV[1]
local from, most, bytes = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local out = {}
local function add(id, score)
  out[#out + 1] = id
  out[#out + 1] = score
  return #id
end
each_member(set, from, from + most, bytes, add)
return out
