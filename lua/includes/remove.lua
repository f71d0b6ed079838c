-- take one job out of every set and its lane, give back a lane slot when it
-- was in flight, delete the row and logs, release its dedup key(s).
-- returns 1 removed, -1 gone, 0 locked (nothing written for 0; for -1 the one
-- cleanup: a ghost -- the id left as a member of a state set or lane after its
-- row went -- leaves those sets (its lane only while the queue knows at most
-- GHOST_LANES lanes, and their names fit GHOST_BYTES, refusals.lua); an id in no set changes nothing); then the work
-- it cost (1 an id; a removed job 2, its row, logs and every set written; a ghost 1
-- more for each lane it was looked for in) and the bytes its delete freed (with
-- the id's, and a ghost's lane names read: remove_word counts the same)
--@include refusals

local function remove_one(base, id, dedup)
  local jk = base .. 'job:' .. id
  local refused, row = remove_refusal(base, id)
  if refused == -1 then
    for _, t in ipairs({'pending', 'active', 'schedule', 'dead'}) do redis.call('ZREM', base .. t, id) end
    -- a backlog key of another type (another client's) is passed over
    local looked, read = ghost_lanes(base, function(g) redis.pcall('ZREM', lane_pending(base, g), id) end)
    return -1, 1 + looked, id_cost(id) + read
  end
  -- a held job is left untouched
  if refused == 0 then return 0, 1, id_cost(id) end
  local freed = id_cost(id) + payload_bytes(jk)
  local was_active = redis.call('ZREM', base .. 'active', id) == 1
  for _, t in ipairs({'pending', 'schedule', 'dead'}) do redis.call('ZREM', base .. t, id) end
  if row[1] then
    redis.call('ZREM', lane_pending(base, row[1]), id)
    if was_active then lane_release(base, row[1]) end
  end
  redis.call('UNLINK', jk, jk .. ':logs')
  release_dedup(base, row[2], id)
  if dedup and dedup ~= '' then release_dedup(base, dedup, id) end
  emit_job(base, 'removed', id)
  return 1, 2, freed
end
