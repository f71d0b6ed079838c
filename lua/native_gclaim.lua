-- @native_gclaim -- the grouped claim with the paused read folded in (function executor).
-- KEYS[1] = the ring, KEYS[2] = active, KEYS[3] = the queue base root
-- ARGV[1] = lease_ms, ARGV[2] = the lock token (optional: EchoMQ's Elixir callers send none)
-- returns {} when paused or no lane is runnable, else {id, payload, attempts};
-- EMQSTATE bad row <field> in <id> (the head row, or a lane meta, unreadable: nothing popped)
--@include common
--@include lanes
--@include activate
-- the paused field and the metrics retention in one read
local meta = redis.call('HMGET', KEYS[3] .. 'meta', 'paused', 'metrics_keep')
if meta[1] then return {} end
return claim_lanes(KEYS[1], KEYS[3], tonumber(ARGV[1]), ARGV[2] or '', meta[2])
