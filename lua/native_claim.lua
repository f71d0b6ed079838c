-- @native_claim -- EMQ.CLAIM semantics, for the function executor: the paused
-- read folded into the claim, so one round trip.
-- KEYS[1] = pending, KEYS[2] = active, KEYS[3] = the queue base root
-- ARGV[1] = lease_ms, ARGV[2] = the lock token (optional: EchoMQ's Elixir callers send none)
-- returns {} when paused or empty, else {id, payload, attempts};
-- EMQSTATE bad row <field> in <id> (the head row, or a lane meta, unreadable: nothing popped)
--@include common
--@include lanes
--@include activate
-- the paused field and the metrics retention in one read
local meta = redis.call('HMGET', KEYS[3] .. 'meta', 'paused', 'metrics_keep')
if meta[1] then return {} end
return claim_flat(KEYS[1], KEYS[3], tonumber(ARGV[1]), ARGV[2] or '', meta[2])
