-- the one reprocess body, used by @reprocess2, @native_reprocess, @reprocess_jobs and
-- @reprocess_dead: a dead job back to be claimed -- flat to pending at score 0,
-- grouped to its lane (which rejoins the ring with a wake token when runnable);
-- the counters stay, `last_error` goes, `state` becomes pending.

--@include refusals

-- the row's writes: the error goes, the state becomes pending, a grouped job
-- joins its lane; then the event. The caller moves a flat id between the sets
-- (@reprocess_dead does it in batches). `jk`: the row's key, when the caller has it.
local function reprocess_row(base, id, g, jk)
  jk = jk or base .. 'job:' .. id
  -- the counters stay; only the error and the state change
  redis.call('HDEL', jk, 'last_error')
  redis.call('HSET', jk, 'state', 'pending')
  -- a grouped job returns to its lane, not the flat set
  if g then lane_push(base, g, 0, id) end
  emit_job(base, 'reprocessed', id)
end

-- one job's whole move, once reprocess_refusal(...) answered nil: out of dead, a
-- flat job into pending at score 0, then the row's writes
local function reprocess_move(base, id, dead, pending)
  redis.call('ZREM', dead, id)
  local g = redis.call('HGET', base .. 'job:' .. id, 'group')
  if not g then redis.call('ZADD', pending, 0, id) end
  reprocess_row(base, id, g)
end
