-- the one reprocess body, used by @reprocess2, @native_reprocess, @reprocess_jobs and
-- @reprocess_dead: a dead job back to be claimed -- flat to pending at score 0,
-- grouped to its lane (which rejoins the ring with a wake token when runnable);
-- the counters stay, `last_error` goes, `state` becomes pending.

--@include refusals

-- the row's writes: the error goes, the state becomes pending, a grouped job
-- joins its lane; then the event. The caller moves a flat id between the sets
-- (@reprocess_dead does it in batches).
local function reprocess_row(base, id, g)
  local jk = base .. 'job:' .. id
  -- the counters stay; only the error and the state change
  redis.call('HDEL', jk, 'last_error')
  redis.call('HSET', jk, 'state', 'pending')
  -- a grouped job returns to its lane, not the flat set
  if g then lane_push(base, g, 0, id) end
  emit(base, {event = 'reprocessed', job = id})
end

-- one job's whole move, once reprocess_refusal(...) answered nil: out of dead, a
-- flat job into pending at score 0, then the row's writes
local function reprocess_move(base, id, dead, pending)
  redis.call('ZREM', dead, id)
  local g = redis.call('HGET', base .. 'job:' .. id, 'group')
  if not g then redis.call('ZADD', pending, 0, id) end
  reprocess_row(base, id, g)
end

-- the bulk reprocess (@reprocess_dead) reads a dead member's group and every
-- whole-number field in ONE HMGET; the membership is known (it was just read
-- from the dead set), so no ZSCORE
local REPROCESS_FIELDS = {'group'}
for i = 1, #ROW_WHOLES do REPROCESS_FIELDS[i + 1] = ROW_WHOLES[i][1] end

-- reprocess_refusal(...) for a member of the dead set, in the same order of
-- checks: nil and the group (false when flat) when it may go back, else the
-- refusal (-1 for no row). Reads only.
local function dead_member_refusal(base, id)
  local jk = base .. 'job:' .. id
  local vals = redis.call('HMGET', jk, unpack(REPROCESS_FIELDS))
  -- a hash with none of these fields may still be a row: only then ask EXISTS
  local any = false
  for i = 1, #REPROCESS_FIELDS do
    if vals[i] then any = true; break end
  end
  if not any and redis.call('EXISTS', jk) == 0 then return -1 end
  for i, s in ipairs(ROW_WHOLES) do
    if whole_of(vals[i + 1], s[2]) == nil then return bad_row(s[1], id) end
  end
  local g = vals[1]
  if g then
    local refused = lane_refusal(base, g)
    if refused then return refused end
  end
  return nil, g
end
