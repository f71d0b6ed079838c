-- the grouped claim (@gclaim2, @native_gclaim): runnable lanes round-robin off the ring
--@include activate

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
    -- bytes; the first runnable lane usually ends it
    local next_lane = redis.pcall('LRANGE', ring, i, i)
    -- a ring of another type than a list (another client's): no claim reads it
    if next_lane.err then return bad_row('type', ring) end
    if #next_lane == 0 then break end
    i = i + 1
    local g = next_lane[1]
    order[i] = g
    if foreign_lane(g) then
      -- a foreign lane is passed over unread, its bytes counted once; it leaves the
      -- ring, its meta is not written
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
