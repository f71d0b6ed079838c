-- @read_repeats -- a page of a queue's repeat registry in due order, each definition
-- with its name; reads only.
--@readonly
-- KEYS[1] = the queue base root
-- ARGV[1] = the first rank (0-based, in due order); ARGV[2] = repeatables at most;
--   ARGV[3] = bytes at most; ARGV[4] = the longest definition answered whole (bytes)
-- returns {name, next due, definition, problem, ..., bytes}: from that rank, ARGV[2]
--   repeatables, fewer where the registry ends or once their bytes reach ARGV[3] (one at
--   least), then the bytes counted (names, and definitions as `readable` counts them).
--   A definition over ARGV[4] bytes is answered by its length (HSTRLEN, never read); a
--   missing one (or a definitions key that is no hash) as nil. The problem is nil for a
--   definition a tick reads, else `readable`'s word (includes/repeat_def.lua). A
--   registry key that is no sorted set answers {0}. Names are read a chunk at a time
--   (`each_member`, includes/chunks.lua), so a call costs about ARGV[3] bytes and ARGV[2]
--   names, whatever the registry holds.
--@include repeat_def
local base = KEYS[1]
local defs = base .. 'repeat:defs'
local from, most = tonumber(ARGV[1]), tonumber(ARGV[2])
local bytes, longest = tonumber(ARGV[3]), tonumber(ARGV[4])
local out = {}
local held = redis.call('TYPE', base .. 'repeat')
if (type(held) == 'table' and held.ok or held) ~= 'zset' then return {0} end
local function add(name, due)
  local size, def, problem = redis.pcall('HSTRLEN', defs, name), false, false
  if type(size) ~= 'number' then
    size = 0
  elseif size > longest then
    def, size = size, 0
  else
    def = redis.call('HGET', defs, name)
    if def then
      local _, bad, work = readable(def)
      problem, size = bad or false, work
    end
  end
  local n = #out
  out[n + 1], out[n + 2], out[n + 3], out[n + 4] = name, due, def, problem
  return #name + size
end
local _, _, _, spent = each_member(base .. 'repeat', from, from + most, bytes, add)
out[#out + 1] = spent
return out
