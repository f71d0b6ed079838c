-- @native_gclaim -- the grouped claim with the paused read folded in (function executor).
-- KEYS[1] = the ring, KEYS[2] = active, KEYS[3] = the queue base root
-- ARGV[1] = lease_ms, ARGV[2] = the lock token (optional: EchoMQ's Elixir callers send none),
--   ARGV[3] = '1' to tell a call stopped at its bound from an empty queue (optional, the
--   toolkit's: only the claim can tell them apart, a re-read of the backlog's size cannot,
--   since a paused queue holds one too; EchoMQ's callers send none and get {} for both)
-- returns {} when paused or no lane is runnable, else {id, payload, attempts}; 'more' (ARGV[3] sent; {} when not)
-- when the call stopped at its bound: one call examines at most CLAIM_SKIPS lanes
-- and ghosts all told, and about CLAIM_BYTES of their names and ids (includes/activate.lua):
-- the lanes it passed over leave the ring, its ghosts their lane, a lane it stopped in
-- stays at the ring's head;
-- EMQSTATE bad row <field> in <id> (the head row, or a lane meta, unreadable: nothing popped)
--@include common
--@include lanes
--@include claim_lanes
-- the paused field asked whether it is there (any value pauses: one another node wrote
-- long is never copied); the metrics retention read measured by the claim (metrics_keep)
if redis.call('HEXISTS', KEYS[3] .. 'meta', 'paused') == 1 then return {} end
return claim_lanes(KEYS[1], KEYS[3], tonumber(ARGV[1]), ARGV[2] or '', nil, (ARGV[3] or '') ~= '')
