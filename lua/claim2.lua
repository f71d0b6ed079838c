-- @claim2 -- the live flat claim: serve the head of pending. Carries NO pause
-- logic: jobs.claim reads the paused field above it, in its own round trip.
-- KEYS[1] = pending, KEYS[2] = active, KEYS[3] = the queue base root
-- ARGV[1] = lease_ms, ARGV[2] = the lock token (optional: EchoMQ's Elixir callers send none)
-- returns {} when empty, else {id, payload, attempts};
-- EMQSTATE bad row <field> in <id> (the head row, or a lane meta, unreadable: nothing popped)
--@include common
--@include lanes
--@include activate
return claim_flat(KEYS[1], KEYS[3], tonumber(ARGV[1]), ARGV[2] or '')
