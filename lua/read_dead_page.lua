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

local out, spent, longest = {size, size}, 0, 0

-- members from place `at` of the order `range` reads, at most `want`: a chunk grows from
-- 8 to 100 and holds no more ids than the bytes left would take at the longest id met
local function chunk_of(range, at, want)
  if longest > 0 then want = math.min(want, math.max(1, math.floor((bytes - spent) / longest))) end
  local page = redis.call(range, set, at, at + want - 1, 'WITHSCORES')
  for k = 1, #page, 2 do
    if #page[k] > longest then longest = #page[k] end
  end
  return page, #page < 2 * want
end
local function add(id, score, attempts)
  out[#out + 1], out[#out + 2], out[#out + 3] = id, score, attempts
  spent = spent + #id
end

if order == 'attempts' then
  -- the newest `examine` members, read a chunk at a time, ranked here
  local ranked, at, chunk = {}, 0, 8
  while at < examine and spent < bytes do
    local page, ended = chunk_of('ZREVRANGE', at, math.min(chunk, examine - at))
    for k = 1, #page, 2 do
      ranked[#ranked + 1] = {page[k], tonumber(page[k + 1]), attempts_of(page[k]), page[k + 1]}
      spent = spent + #page[k]
    end
    if ended then break end
    at, chunk = at + #page / 2, math.min(2 * chunk, 100)
  end
  table.sort(ranked, function(a, b)
    if a[3] ~= b[3] then return a[3] > b[3] end
    if a[2] ~= b[2] then return a[2] > b[2] end
    return a[1] < b[1]
  end)
  out[2], spent = #ranked, 0
  for i = from + 1, math.min(#ranked, from + most) do
    add(ranked[i][1], ranked[i][4], ranked[i][3])
    if spent >= bytes then break end
  end
  return out
end

local range = order == 'oldest' and 'ZRANGE' or 'ZREVRANGE'
local at, chunk = from, 8
while at < from + most and spent < bytes do
  local page, ended = chunk_of(range, at, math.min(chunk, from + most - at))
  for k = 1, #page, 2 do
    add(page[k], page[k + 1], attempts_of(page[k]))
    if spent >= bytes then return out end
  end
  if ended then break end
  at, chunk = at + #page / 2, math.min(2 * chunk, 100)
end
return out
