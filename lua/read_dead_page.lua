-- @read_dead_page -- a page of a queue's sorted set, newest first or most attempts first; reads only.
--@readonly
-- KEYS[1] = the queue base root
-- ARGV[1] = the sorted set, its name under the root (`dead`); ARGV[2] = the order:
--   `time` (highest score first: the newest death), `oldest` (lowest score first) or
--   `attempts` (most attempts first, then the newest, among the ARGV[5] highest scores);
--   ARGV[3] = the first place in that order (0-based); ARGV[4] = members at most;
--   ARGV[5] = members examined at most (`attempts` only); ARGV[6] = bytes of ids at most
-- returns {size, examined, id, score, attempts, ...}: the set's size, the members the
-- order ranked (`attempts`: those examined; else the size), and ARGV[4] members from that
-- place, fewer where the set ends or once their ids' bytes reach ARGV[6] (one at least);
-- attempts is -1 for a row that has none readable (no row, a foreign id, no whole number)
--@include reads
local set = KEYS[1] .. ARGV[1]
local order, from, most = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local examine, bytes = tonumber(ARGV[5]), tonumber(ARGV[6])
local size = redis.call('ZCARD', set)

-- a member's attempts, measured before it is read (another node may write any text)
local function attempts_of(id)
  if foreign_id(id) then return -1 end
  local jk = KEYS[1] .. 'job:' .. id
  local long = redis.pcall('HSTRLEN', jk, 'attempts')
  if type(long) ~= 'number' or long == 0 or long > WHOLE_DIGITS then return -1 end
  return whole_of(redis.call('HGET', jk, 'attempts'), -1) or -1
end

local out = {size, size}
local function add(id, score, attempts)
  out[#out + 1], out[#out + 2], out[#out + 3] = id, score, attempts
  return #id
end

if order == 'attempts' then
  -- the newest `examine` members, ranked here
  local ranked = {}
  each_member(set, 0, examine, bytes, function(id, score)
    ranked[#ranked + 1] = {id, tonumber(score), attempts_of(id), score}
    return #id
  end, 'ZREVRANGE')
  table.sort(ranked, function(a, b)
    if a[3] ~= b[3] then return a[3] > b[3] end
    if a[2] ~= b[2] then return a[2] > b[2] end
    return a[1] < b[1]
  end)
  out[2] = #ranked
  local spent = 0
  for i = from + 1, math.min(#ranked, from + most) do
    spent = spent + add(ranked[i][1], ranked[i][4], ranked[i][3])
    if spent >= bytes then break end
  end
  return out
end

each_member(set, from, from + most, bytes, function(id, score)
  return add(id, score, attempts_of(id))
end, order == 'oldest' and 'ZRANGE' or 'ZREVRANGE')
return out
