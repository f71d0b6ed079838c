-- @read_repeats -- a page of a queue's repeat registry in due order, each definition
-- with its name; reads only.
--@readonly
-- A listing's page: the names are read a chunk at a time within a byte budget
-- (includes/reads.lua each_member), and each definition's length before its bytes
-- (HSTRLEN), so a registry of 100,000 repeatables, or a definition another node made
-- 20 MB long, costs a call about ARGV[3] bytes and ARGV[2] names, not the whole
-- registry (of 100,000 repeatables, one ZRANGE held Valkey 56 ms, one HGETALL 30).
-- KEYS[1] = the queue base root
-- ARGV[1] = the first rank (0-based, in due order); ARGV[2] = repeatables at most;
--   ARGV[3] = bytes at most; ARGV[4] = the longest definition answered whole (bytes)
-- returns {name, next due, definition, problem, ..., bytes}: from that rank, ARGV[2]
-- repeatables, or fewer where the registry ends or once their bytes reach ARGV[3] (one
-- at least), then the bytes the page counted (its names, and each definition read as
-- `readable` counts it: a short one decoded whole DECODE_WORK times its length). A
-- definition over ARGV[4] bytes is answered as its length (a number); a missing one (or
-- a definitions key that is no hash) as nil. The problem is nil for a definition a tick
-- reads, else the word `readable` (includes/repeat_def.lua) answers: the one rule of a
-- readable definition, read here as a tick reads it. A registry key that is no sorted
-- set answers no repeatable ({0}).
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
