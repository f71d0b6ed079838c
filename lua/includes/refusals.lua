-- the checks a transition runs before its first write, shared with its dry run:
-- each reads only and answers nil (the transition may go ahead) or what refuses it.
--@include reads

-- what stops job `id` going back: nil when it may, else the reply that refuses
-- it (-1 for no row, EMQSTATE not dead, EMQSTATE bad row type for a key of another
-- type, EMQSTATE reprocess lane not native when lanes are not carried, EMQSTATE bad
-- row ... for a field or a lane's meta). Reads only: the dead check is a
-- ZSCORE here, so the checks all run before the first write.
local function reprocess_refusal(base, id, dead, carries_lanes)
  local jk = base .. 'job:' .. id
  if redis.call('EXISTS', jk) == 0 then return -1 end
  if not redis.call('ZSCORE', dead, id) then return redis.error_reply('EMQSTATE not dead') end
  -- a key of another type under the row's name (another client's): bad row 'type'
  local g, refused = row_field(jk, 'group', id)
  if refused then return refused end
  if g and not carries_lanes then
    return redis.error_reply('EMQSTATE reprocess lane not native')
  end
  local nums, bad = row_wholes(jk)
  if not nums then return bad_row(bad, id) end
  if g then return lane_refusal(base, g) end
  return nil
end

-- what stops job `id` being removed: nil when it may be (then its {group, dedup}),
-- -1 for no row, 0 when a worker holds it (a `:lock` key or a `lock` field). One
-- HMGET (EXISTS only for a hash holding none of its fields). Reads only.
local function remove_refusal(base, id)
  local jk = base .. 'job:' .. id
  -- a key of another type under the row's name (another client's) holds none of these
  -- fields, and is removed as a row is: the job's own key, which every other verb refuses
  -- (bad row 'type'), and the operator named it (jobs.remove_job)
  local row = redis.pcall('HMGET', jk, 'group', 'dedup', 'lock')
  if row.err then row = {false, false, false} end
  if not (row[1] or row[2] or row[3]) and redis.call('EXISTS', jk) == 0 then return -1 end
  if row[3] or redis.call('EXISTS', jk .. ':lock') == 1 then return 0 end
  return nil, row
end

-- the word a bulk reprocess answers for job `id` (flat or grouped: lanes are carried),
-- in the order of reprocess_refusal's checks: 'foreign_id' (never addressed), 'gone',
-- 'not_dead', 'bad_row' (then the refusal naming the field) or 'reprocessed' (then
-- the group, false when flat); and the bytes read. `seen` as read_member's. Reads only.
local function reprocess_word(base, id, dead, seen)
  if foreign_id(id) then return 'foreign_id', nil, foreign_cost(id) end
  local refused, g, _, bytes = read_member(base, id, seen)
  bytes = bytes + id_cost(id)
  if refused == -1 then return 'gone', nil, bytes end
  if not redis.call('ZSCORE', dead, id) then return 'not_dead', nil, bytes end
  if refused then return 'bad_row', refused, bytes end
  return 'reprocessed', g, bytes
end

-- a ghost (an id with no row) is looked for in every lane only while the queue knows
-- at most GHOST_LANES lanes (an SMEMBERS and a ZREM a lane), and in those whose names
-- fit GHOST_BYTES (each name counted ID_WORK times: a key is built of it); past that it
-- stays in whichever lane holds it, and that lane's claim drops it when it reaches the
-- head (activate.lua `claim_flat`, claim_lanes.lua)
local GHOST_LANES = 1000
local GHOST_BYTES = 1048576

-- the lanes a ghost is looked for in (remove.lua `remove_one`), each handed to
-- visit(g) when given: the groups set walked in chunks (chunks.lua `each_lane`) until
-- the walk ends or the names reach GHOST_BYTES. A foreign lane is passed over, and so
-- is a groups key that is no set. Answers the lanes looked in and the bytes of names
-- read, which the call's bytes count: a step of many ghosts stops there.
local function ghost_lanes(base, visit)
  local groups = base .. 'groups'
  local known = redis.pcall('SCARD', groups)
  if type(known) ~= 'number' or known == 0 or known > GHOST_LANES then return 0, 0 end
  local looked = 0
  local _, _, spent = each_lane(groups, '0', GHOST_LANES, GHOST_BYTES, function(g)
    if foreign_lane(g) then return #g end
    looked = looked + 1
    if visit then visit(g) end
    return id_cost(g)
  end)
  return looked, spent
end

-- the word a bulk remove answers for job `id` ('foreign_id', 'gone', 'locked' or
-- 'removed'), the work it costs and the bytes it frees, as remove_one counts them.
-- Reads only.
local function remove_word(base, id)
  if foreign_id(id) then return 'foreign_id', 1, foreign_cost(id) end
  local refused = remove_refusal(base, id)
  if refused == -1 then
    local looked, read = ghost_lanes(base)
    return 'gone', 1 + looked, id_cost(id) + read
  end
  if refused == 0 then return 'locked', 1, id_cost(id) end
  return 'removed', 2, id_cost(id) + payload_bytes(base .. 'job:' .. id)
end
