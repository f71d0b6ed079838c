-- @promote -- due scheduled jobs (delayed, or retrying) become ready: pending,
-- or their lane for a grouped job.
-- KEYS[1] = schedule, KEYS[2] = the queue base root
-- ARGV[1] = budget, members examined at most; ARGV[2] = bytes read at most;
--   ARGV[3], ARGV[4] = the place (score, member) the previous call ended at ('' = the start)
-- returns {n, score, member, more}: n promoted; the place of the last member
-- examined and more = 1 while due members follow it (more = 0: the next call starts
-- from the start). A ghost (a member with no row) leaves the set, uncounted; a bad
-- row (or its lane's meta) or a foreign id (ids.lua `foreign_id`) is left where it is, with a `bad_row` event. Each costs its member of the
-- budget. Bounded: at most ARGV[1] members (one HMGET each, and a promoted job's
-- three writes; its leaving the set one ZREM per 500 jobs), and about ARGV[2] bytes
-- read (a member's fields, its id).
--@include common
--@include lanes
--@include due
local set, base = KEYS[1], KEYS[2]
-- the promoted leave the set at the end of the step: one ZREM per 500 jobs instead of
-- one a job (nothing in between reads the set)
local promoted = {}
local reply = due_moves(set, base, 'promote', ARGV, function(id, g, priority, jk)
  promoted[#promoted + 1] = id
  redis.call('HSET', jk, 'state', 'pending')
  make_ready(base, id, g, priority)
  emit_job(base, 'promoted', id)
end)
for s = 1, #promoted, 500 do redis.call('ZREM', set, unpack(promoted, s, math.min(s + 499, #promoted))) end
return reply
