-- the one reprocess body, used by @reprocess2, @native_reprocess and
-- @reprocess_dead: a dead job back to be claimed -- flat to pending at score 0,
-- grouped to its lane (which rejoins the ring with a wake token when runnable);
-- the counters stay, `last_error` goes, `state` becomes pending.

--@include refusals

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
