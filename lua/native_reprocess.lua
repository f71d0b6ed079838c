-- @native_reprocess -- EMQ.REPROCESS semantics, for the function executor:
-- the handler tests dead membership with a READ before any write, and refuses a
-- grouped dead row (only the script carries a job back to its lane).
-- KEYS[1] = the row, KEYS[2] = dead, KEYS[3] = pending, KEYS[4] = the queue base
-- ARGV[1] = id
-- returns 1; -1 for a missing row; EMQSTATE not dead; EMQSTATE reprocess lane not native
--@include common
local jk, id = KEYS[1], ARGV[1]
if redis.call('EXISTS', jk) == 0 then return -1 end
if not redis.call('ZSCORE', KEYS[2], id) then
  return redis.error_reply('EMQSTATE not dead')
end
if redis.call('HEXISTS', jk, 'group') == 1 then
  return redis.error_reply('EMQSTATE reprocess lane not native')
end
-- every check has run: now the writes, the same as @reprocess2 for a flat row
redis.call('ZREM', KEYS[2], id)
redis.call('HDEL', jk, 'last_error')
redis.call('HSET', jk, 'state', 'pending')
redis.call('ZADD', KEYS[3], 0, id)
emit(KEYS[4], {event = 'reprocessed', job = id})
return 1
