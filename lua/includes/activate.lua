--@include metrics
--@include latency
--@include claim_head
-- hand one ready job to a worker: attempts+1, active until the lease deadline,
-- the PX lock a worker holds while it owns the job, and the claim's token on the
-- row as `owner` (the :lock key may expire while the job is still in active;
-- complete and fail compare the token with `owner`, which stays). The claim time
-- goes on the row as `claimed_at`; the claim is counted (`metrics:claimed`) and
-- its wait recorded. A row with no readable `created_at` or `due_at` (an older
-- node's) is claimed all the same, its wait not measured.
-- `read` is claim_head's {payload, created_at, due_at}, read before these writes.
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
-- of pending or of a lane whose row is gone) and passes over at most that many lanes
-- of the ring, all told, and about CLAIM_BYTES of their ids and lane names (ids.lua
-- `id_cost`). Past the bound the call stops with what it dropped gone and the lanes it
-- passed over off the ring, and answers as a call that found nothing: {} (EchoMQ's
-- reply), or 'more' when the caller sends ARGV[3] = '1' (the toolkit's claims; optional
-- and last): call again at once, a job may wait behind what is left.
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

