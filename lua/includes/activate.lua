--@include metrics
--@include latency
-- hand one ready job to a worker: attempts+1, active until the lease deadline,
-- the PX lock a worker holds while it owns the job, and the claim's token on the
-- row as `owner` (the :lock key may expire while the job is still in active;
-- complete and fail compare the token with `owner`, which stays). The claim time
-- goes on the row as `claimed_at`; the claim is counted (`metrics:claimed`) and
-- its wait recorded. A row with no readable `created_at` or `due_at` (an older
-- node's) is claimed all the same, its wait not measured.
-- `read` is claim_read's {payload, created_at, due_at}, read before these writes.
local function activate(base, id, lease, token, now, keep, read)
  local jk = base .. 'job:' .. id
  local att = redis.call('HINCRBY', jk, 'attempts', 1)
  local at = string.format('%.0f', now)
  if token ~= '' then
    redis.call('HSET', jk, 'state', 'active', 'claimed_at', at, 'owner', token)
  else
    redis.call('HSET', jk, 'state', 'active', 'claimed_at', at)
    redis.call('HDEL', jk, 'owner')
  end
  redis.call('ZADD', base .. 'active', now + lease, id)
  redis.call('SET', jk .. ':lock', token ~= '' and token or '1', 'PX', lease)
  bump_metric(base, 'claimed', now, keep)
  -- the job was ready at the later of its creation and its due time
  local created, due = whole_of(read[2]), whole_of(read[3])
  local ready = (created and due and math.max(created, due)) or created or due
  if ready then record_latency(base, 'wait', now - ready, now, keep) end
  emit(base, {event = 'active', job = id, attempts = att})
  return {id, read[1], att}
end

-- what a claim reads of a head row, in one HMGET: the whole-number fields (checked
-- before any write), then the payload and the two times its wait is measured from
-- (plain loops: an include's top level reads no global but `redis`, lua/README.md)
local CLAIM_READS, N_WHOLES = {}, #ROW_WHOLES
for i = 1, N_WHOLES do CLAIM_READS[i] = ROW_WHOLES[i][1] end
CLAIM_READS[N_WHOLES + 1], CLAIM_READS[N_WHOLES + 2], CLAIM_READS[N_WHOLES + 3] = 'payload', 'created_at', 'due_at'

-- the bytes a head row may hold past its payload for its fields a claim reads to be read
-- in one HMGET unmeasured: Valkey measures the row (MEMORY USAGE, no field copied); a row
-- over it (or not measured: the embedded fake, an ACL user without MEMORY USAGE, a row of
-- more than MEASURED_FIELDS fields, reads.lua: MEMORY USAGE ... SAMPLES 0 walks each
-- field of a hashtable, and a row of 1,000,000 fields another node wrote held a claim 30
-- ms) has each of those fields measured first (HSTRLEN), and one longer than WHOLE_DIGITS
-- (no whole number, whatever it holds) is not read. A row whose numbers and times
-- another node wrote 3 MB each held every claim call 30 to 40 ms only to refuse it
local CLAIM_ROW_BYTES = 65536
-- what a field measured too long reads as: no whole number (never nil: an absent field
-- reads as its default)
local TOO_LONG = 'x'

-- the head row `jk` of member `id` as a claim reads it: false when there is no row (a
-- ghost); else true and the first whole-number field no transition can read (nil when
-- none), and {payload, created_at, due_at} for activate. EXISTS is asked only of a
-- row that holds none of these fields. A key of another type than a hash: for a
-- foreign id (reads.lua `foreign_id`: `x:logs`, `x:lock` name job x's list and lock)
-- no job, a ghost; for any other id a row no transition can read ('type'), where a
-- WRONGTYPE error stopped every claim of the queue
local function claim_read(jk, id)
  local fields = redis.pcall('HLEN', jk)
  if type(fields) ~= 'number' then
    if foreign_id(id) then return false end
    return true, 'type'
  end
  -- no key: a ghost (a hash is never empty)
  if fields == 0 then return false end
  local size = fields <= MEASURED_FIELDS and redis.pcall('MEMORY', 'USAGE', jk, 'SAMPLES', '0')
  local asked, long = CLAIM_READS, nil
  -- the usual row, all of it within CLAIM_ROW_BYTES, is read without its payload measured
  local over = type(size) ~= 'number'
    or (size > CLAIM_ROW_BYTES and size > redis.call('HSTRLEN', jk, 'payload') + CLAIM_ROW_BYTES)
  if over then
    asked, long = {}, {}
    for i, name in ipairs(CLAIM_READS) do
      if name ~= 'payload' and redis.call('HSTRLEN', jk, name) > WHOLE_DIGITS then
        long[i] = true
      else
        asked[#asked + 1] = name
      end
    end
  end
  local got, vals = redis.call('HMGET', jk, unpack(asked)), {}
  local k = 0
  for i = 1, #CLAIM_READS do
    if long and long[i] then
      vals[i] = TOO_LONG
    else
      k = k + 1
      vals[i] = got[k]
    end
  end
  local any = false
  for i = 1, #CLAIM_READS do
    if vals[i] then
      any = true
      break
    end
  end
  if not any and redis.call('EXISTS', jk) == 0 then return false end
  for i, w in ipairs(ROW_WHOLES) do
    if whole_of(vals[i], w[2]) == nil then return true, w[1] end
  end
  return true, nil, {vals[N_WHOLES + 1], vals[N_WHOLES + 2], vals[N_WHOLES + 3]}
end

-- the head member `id` as a claim reads it (claim_read). An id over MAX_ID bytes is
-- foreign (reads.lua `foreign_id`): no job a script addresses, so its row is not read
-- and it is dropped as a ghost is, its row and keys left as they are (an EchoMQ node's
-- job of a 1 MB id held a claim 17 to 20 ms, each command of the claim copying or
-- hashing the id again: served, or dropped as a 4 MB ghost, 13 to 21 ms)
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

-- a lease a claim can set: a whole number of ms, at most a year (what SET PX takes)
local function lease_refusal(lease)
  if not lease or lease < 1 or lease > 31622400000 or lease ~= math.floor(lease) then
    return redis.error_reply('ERR lease_ms must be a whole number of ms from 1 to 31622400000')
  end
  return nil
end

-- what a claim checks before any write: its lease, then the metrics retention (the
-- claim counts itself; `kept`: the meta field as the caller read it already; nil:
-- read it here). Answers the retention, or nil and the refusal.
local function claim_keep(base, lease, kept)
  local refused = lease_refusal(lease)
  if refused then return nil, refused end
  local keep
  if kept == nil then keep = metrics_keep(base) else keep = keep_of(kept) end
  if not keep then return nil, bad_row('metrics_keep', 'meta') end
  return keep
end

-- A claim's bound (extension): one call drops at most CLAIM_SKIPS ghosts (members
-- of pending or of a lane whose row is gone: another node deleted it, or a TTL another
-- node set expired it) and passes over at most that many lanes of the ring, all told,
-- and about CLAIM_BYTES of their ids and lane names (each ID_WORK times its bytes,
-- reads.lua `id_cost`: a ghost's id is hashed at the row key, the EXISTS and the ZREM).
-- A ghost costs a ZRANGE, an HSTRLEN, a MEMORY USAGE and a ZREM (the fake: HSTRLENs, an
-- HMGET and an EXISTS), a lane an LRANGE and the four reads of its meta (and its HDEL
-- off the ring, one LTRIM for them all): 500 of them hold Valkey a few ms (bench/
-- claim_ghosts.py), where 100,000 ghosts ahead of one job held it 520 ms in one call
-- (833 ms in a lane). Past the bound the call stops with what it dropped gone and the
-- lanes it passed over off the ring, as a call that found nothing does, and answers
-- as one: {} (EchoMQ's reply: nothing served). Its caller cannot tell that from an
-- empty queue, so the toolkit's claims send ARGV[3] = '1' (optional and last: EchoMQ's
-- own callers never send it and keep their reply), and to them a call stopped at its
-- bound answers 'more': call again at once, a job may wait behind what is left.
local CLAIM_SKIPS, CLAIM_BYTES = 500, 1048576

-- what a claim stopped at its bound answers: 'more' when its caller asked to tell it
-- from an empty queue (ARGV[3]), else {}
local function claim_stopped(more)
  if more then return 'more' end
  return {}
end

-- the flat claim body: the head of pending (priority, then id order). The head
-- is read and checked before it is popped: a bad row refuses with nothing written.
-- Ghosts at the head are dropped, CLAIM_SKIPS at most a call.
local function claim_flat(pending, base, lease, token, kept, more)
  local keep, refused = claim_keep(base, lease, kept)
  if not keep then return refused end
  local now = now_ms()
  local skipped, spent = 0, 0
  while true do
    local head = redis.pcall('ZRANGE', pending, 0, 0)
    -- pending of another type than a zset (another client's): a row no claim reads
    if head.err then return bad_row('type', pending) end
    if #head == 0 then return {} end
    local id = head[1]
    local row, bad, read = claim_head(base, id)
    if row then
      if bad then return bad_row(bad, id) end
      redis.call('ZREM', pending, id)
      return activate(base, id, lease, token, now, keep, read)
    end
    -- a ghost (a member whose row is gone) is dropped, never served
    redis.call('ZREM', pending, id)
    skipped, spent = skipped + 1, spent + head_cost(id)
    if skipped >= CLAIM_SKIPS or spent >= CLAIM_BYTES then return claim_stopped(more) end
  end
end

-- the grouped claim body: runnable lanes round-robin off the ring. A read pass
-- first finds the lane to serve and checks its meta and its head row (every lane
-- met before it too); only then the writes: the lanes passed over leave the
-- ring (they rejoin when they become runnable), ghosts leave their lane. The pass
-- examines CLAIM_SKIPS lanes and ghosts at most: stopped there, the lanes it passed
-- over leave the ring all the same, and a lane it stopped inside (ghosts at its head,
-- its backlog not read to the end) stays at the ring's head for the next call.
local function claim_lanes(ring, base, lease, token, kept, more)
  local keep, refused = claim_keep(base, lease, kept)
  if not keep then return refused end
  local now = now_ms()
  local order, pick, id, read, ghosts = {}, nil, nil, nil, {}
  local i, skipped, spent = 0, 0, 0
  -- stopped: the pass met its bound; inside: within a lane's backlog, not read to its end
  local stopped, inside = false, false
  while not pick do
    if skipped >= CLAIM_SKIPS or spent >= CLAIM_BYTES then
      stopped = true
      break
    end
    -- the ring is read a lane at a time, so a call copies one name at most past its
    -- bytes (read up to 16 at a time, the names after 15 lanes passed over were copied
    -- whatever their length); the first runnable lane usually ends it
    local next_lane = redis.pcall('LRANGE', ring, i, i)
    -- a ring of another type than a list (another client's): no claim reads it
    if next_lane.err then return bad_row('type', ring) end
    if #next_lane == 0 then break end
    i = i + 1
    local g = next_lane[1]
    order[i] = g
    if #g > MAX_ID then
      -- a lane named over MAX_ID bytes (another node's) is foreign: passed over unread,
      -- its bytes counted once (its meta and backlog keys copy and hash the name at each
      -- command: 4 lanes of 4 MB held a claim 25.8 ms); it leaves the ring, its meta
      -- is not written
      skipped, spent = skipped + 1, spent + foreign_cost(g)
    else
      skipped, spent = skipped + 1, spent + id_cost(g)
      local limit, active, paused = measured_lane_counts(base, g)
      -- measured_lane_counts answers nil and the bad field's name
      if limit == nil then return bad_row(active, 'lane ' .. g) end
      if not paused and active < limit then
        local lane, rank = lane_pending(base, g), 0
        while true do
          local head = redis.pcall('ZRANGE', lane, rank, rank)
          -- a backlog of another type than a zset (another client's) holds no job a
          -- claim serves: the lane is passed over (WRONGTYPE stopped every claim)
          if head.err or #head == 0 then break end
          local row, bad, fields = claim_head(base, head[1])
          if row then
            if bad then return bad_row(bad, head[1]) end
            pick, id, read = i, head[1], fields
            break
          end
          ghosts[#ghosts + 1] = {lane, head[1]}
          rank = rank + 1
          skipped, spent = skipped + 1, spent + head_cost(head[1])
          -- a lane examined reads its head at least, so every call moves on
          if skipped >= CLAIM_SKIPS or spent >= CLAIM_BYTES then
            stopped, inside = true, true
            break
          end
        end
      end
    end
  end
  -- every check has run: now the writes
  for _, gh in ipairs(ghosts) do redis.call('ZREM', gh[1], gh[2]) end
  -- the lanes passed over leave the ring (one LTRIM: no name copied again); one the
  -- pass stopped inside stays at its head
  local passed = pick or i
  if inside then passed = i - 1 end
  if passed > 0 then
    redis.call('LTRIM', ring, passed, -1)
    for k = 1, passed do
      if #order[k] <= MAX_ID then redis.call('HDEL', lane_meta(base, order[k]), 'ring') end
    end
  end
  if not pick then
    if stopped then return claim_stopped(more) end
    return {}
  end
  local g = order[pick]
  redis.call('ZREM', lane_pending(base, g), id)
  redis.call('HINCRBY', lane_meta(base, g), 'active', 1)
  -- still runnable: back to the tail of the ring, round-robin
  if lane_runnable(base, g) and redis.call('HSETNX', lane_meta(base, g), 'ring', '1') == 1 then
    redis.call('RPUSH', ring, g)
  end
  return activate(base, id, lease, token, now, keep, read)
end
