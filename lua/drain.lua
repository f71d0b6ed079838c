-- @drain -- wipe a set's rows and logs, then the set itself; bounded.
-- KEYS[1] = the queue base root; KEYS[2] = pending; KEYS[3] = schedule (optional)
-- ARGV[1] = budget: at most this many jobs in one call (extension; EchoMQ's
-- Elixir Admin sends no ARGV and drains everything); ARGV[2] = bytes at most (optional:
-- the members' ids and the payloads their deletes free); ARGV[3] = where the walk of
-- the lanes goes on (optional, the toolkit's: an SSCAN cursor of the groups set, '0'
-- the first call)
-- returns {n, more}: n jobs drained by this call, more = 1 while work remains; with
-- ARGV[3], {n, more, cursor}: the cursor the next call sends; with no budget sent,
-- EchoMQ's own reply: n, the count drained.
-- Active jobs and the repeat registry are never touched; lane backlogs are
-- pending work too and are drained (a lane named over MAX_ID bytes, or whose backlog
-- key is no sorted set, both another node's, is passed over: its backlog stays, as
-- @lane_backlog counts it skipped); held dedup keys are released.
-- A drain reads no numeric field of a row, so a bad row drains like any other; a
-- ghost or a foreign id (reads.lua `foreign_id`) leaves the set, and
-- no key is built from a foreign id. Bounded: at most ARGV[1] members (an HSTRLEN,
-- an HGET of the dedup key while the queue holds any, one UNLINK of row and logs)
-- and about ARGV[2] bytes; with ARGV[3], the lanes walked on from the cursor, a few at
-- a time (an SSCAN of LANE_CHUNK names at most, a ZRANGE a lane, each name counted
-- ID_WORK times its bytes), each lane looked at a unit of ARGV[1] as a job is, and at
-- most LANES_A_CALL of them, never the whole groups set (SMEMBERS of 100,000
-- lanes and a ZRANGE each, every call, held Valkey over 100 ms). Without ARGV[3] (an
-- older client's call) every lane is looked at from the first, each call.
--@include common
--@include lanes
local base = KEYS[1]
local unbounded = ARGV[1] == nil
local budget = unbounded and MAX_WHOLE or tonumber(ARGV[1])
local bytes = whole_of(ARGV[2]) or MAX_WHOLE
local n, spent = 0, 0
-- a row is read for its dedup key only while the queue holds any
local has_dedup = redis.call('EXISTS', base .. 'dedup') == 1
local function wipe(setkey)
  -- a chunk of members at a time: an id is counted only once read (each_member)
  local k, _, _, used = each_member(setkey, 0, budget - n, bytes - spent, function(id)
    if foreign_id(id) then return foreign_cost(id) end
    local jk = base .. 'job:' .. id
    if has_dedup then
      local key = redis.pcall('HGET', jk, 'dedup')
      if type(key) == 'string' then release_dedup(base, key, id) end
    end
    local cost = id_cost(id) + payload_bytes(jk)
    redis.call('UNLINK', jk, jk .. ':logs')
    return cost
  end)
  -- the ranks just examined: no unpack limit on a large budget
  if k > 0 then redis.call('ZREMRANGEBYRANK', setkey, 0, k - 1) end
  n, spent = n + k, spent + used
  return n >= budget or spent >= bytes
end
-- lanes examined by one call that walks on from a cursor, and names one SSCAN asks for
-- at most
local LANES_A_CALL = 2000
local LANE_CHUNK = 16
local cursor = ARGV[3]
-- a lane's backlog drained, or passed over: a name over MAX_ID bytes (only another
-- node writes one: no key is built of it, as a walk of the lanes skips it, lane_walk.lua)
-- or a backlog key that is no sorted set (another client's) would stop every call of
-- the drain there. Answers true once the call's budget is spent
local function wipe_lane(g)
  if #g > MAX_ID then
    spent = spent + #g
    return spent >= bytes
  end
  spent = spent + id_cost(g)
  local key = lane_pending(base, g)
  local size = redis.pcall('ZCARD', key)
  if type(size) ~= 'number' or size == 0 then return spent >= bytes end
  return wipe(key)
end
local function finish(more)
  if n > 0 then emit(base, {event = 'drained', count = n}) end
  if unbounded then return n end
  if cursor then return {n, more, cursor} end
  return {n, more}
end
-- pending, the lanes' backlogs, then the schedule set when asked
if wipe(KEYS[2]) then return finish(1) end
if cursor then
  -- a page of lanes at a time, from the cursor. A call that stops inside a page
  -- answers that page's cursor, so its lanes are looked at again (an emptied one costs
  -- a ZRANGE): it stops there only once it drained a job, so each call moves on
  -- SSCAN asks for one lane first, then twice as many up to LANE_CHUNK, never more
  -- than the bytes left cover at the longest name yet (as lane_walk.lua): 20 names of
  -- 1 MB another node wrote, read in one SSCAN, held Valkey 46 ms
  local examined, longest, chunk = 0, 0, 1
  repeat
    local want = chunk
    if longest > 0 then
      want = math.min(want, math.max(1, math.floor((bytes - spent) / (longest * ID_WORK))))
    end
    chunk = math.min(2 * chunk, LANE_CHUNK)
    local page = redis.call('SSCAN', base .. 'groups', cursor, 'COUNT', want)
    for _, g in ipairs(page[2]) do
      examined = examined + 1
      if #g > longest then longest = #g end
      if wipe_lane(g) and n > 0 then return finish(1) end
    end
    cursor = page[1]
    -- a lane looked at is a unit of the budget, as a job drained is
    if cursor ~= '0' and (n + examined >= budget or examined >= LANES_A_CALL or spent >= bytes) then
      return finish(1)
    end
  until cursor == '0'
else
  for _, g in ipairs(redis.call('SMEMBERS', base .. 'groups')) do
    if wipe_lane(g) then return finish(1) end
  end
end
if KEYS[3] and wipe(KEYS[3]) then return finish(1) end
return finish(0)
