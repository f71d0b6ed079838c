-- the one reprocess body, used by @reprocess2, @native_reprocess and
-- @reprocess_dead: a dead job back to be claimed -- flat to pending at score 0,
-- grouped to its lane (which rejoins the ring with a wake token when runnable);
-- the counters stay, `last_error` goes, `state` becomes pending.

-- what stops job `id` going back: nil when it may, else the reply that refuses
-- it (-1 for no row, EMQSTATE not dead, EMQSTATE reprocess lane not native when
-- lanes are not carried, EMQSTATE bad row ...). Reads only: the dead check is a
-- ZSCORE here, so the checks all run before the first write.
local function reprocess_refusal(base, id, dead, carries_lanes)
  local jk = base .. 'job:' .. id
  if redis.call('EXISTS', jk) == 0 then return -1 end
  if not redis.call('ZSCORE', dead, id) then return redis.error_reply('EMQSTATE not dead') end
  local g = redis.call('HGET', jk, 'group')
  if g and not carries_lanes then
    return redis.error_reply('EMQSTATE reprocess lane not native')
  end
  local nums, bad = row_wholes(jk)
  if not nums then return bad_row(bad, id) end
  if g then return lane_refusal(base, g) end
  return nil
end

-- the writes, once reprocess_refusal(...) answered nil
local function reprocess_move(base, id, dead, pending)
  local jk = base .. 'job:' .. id
  redis.call('ZREM', dead, id)
  -- the counters stay; only the error and the state change
  redis.call('HDEL', jk, 'last_error')
  redis.call('HSET', jk, 'state', 'pending')
  local g = redis.call('HGET', jk, 'group')
  if g then
    -- a grouped job returns to its lane, not the flat set
    lane_push(base, g, 0, id)
  else
    -- a flat job returns to pending at score 0
    redis.call('ZADD', pending, 0, id)
  end
  emit(base, {event = 'reprocessed', job = id})
end
