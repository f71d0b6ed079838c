-- @expire -- lease expiry: an in-flight job whose lease deadline passed goes
-- back to pending (or its lane), `stalled` counted, its lock removed.
-- KEYS[1] = active, KEYS[2] = the queue base root
-- ARGV[1] = budget, members examined at most; ARGV[2] = bytes read at most;
--   ARGV[3], ARGV[4] = the place (score, member) the previous call ended at ('' = the start)
-- returns {n, score, member, more}: n jobs put back; the place of the last member
-- examined and more = 1 while expired members follow it (more = 0: the next call
-- starts from the start). A ghost leaves the set, uncounted; a bad row (or its lane's
-- meta) or a foreign id is left where it is, with a `bad_row` event. Each costs its
-- member of the budget. Bounded: at most ARGV[1] members (one HMGET each, and a
-- moved job's writes; its leaving the set and its lock's removal one ZREM and one
-- UNLINK per 500 jobs), and about ARGV[2] bytes read.
--@include common
--@include lanes
--@include due
local set, base = KEYS[1], KEYS[2]
-- the jobs put back leave the set, and their locks go, at the end of the step: one
-- call per 500 jobs instead of two a job (nothing in between reads either)
local back, locks = {}, {}
local reply = due_moves(set, base, 'expire', ARGV, function(id, g, priority, jk)
  back[#back + 1] = id
  locks[#locks + 1] = jk .. ':lock'
  redis.call('HINCRBY', jk, 'stalled', 1)
  redis.call('HSET', jk, 'state', 'pending')
  if g then lane_release(base, g) end
  make_ready(base, id, g, priority)
  emit_job(base, 'stalled', id)
end)
for s = 1, #back, 500 do
  redis.call('ZREM', set, unpack(back, s, math.min(s + 499, #back)))
  redis.call('UNLINK', unpack(locks, s, math.min(s + 499, #locks)))
end
return reply
