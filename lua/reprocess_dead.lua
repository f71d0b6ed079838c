-- @reprocess_dead -- move dead jobs back, oldest death first, one bounded step of a
-- run (extension). Flat jobs to pending at score 0, grouped ones to their lanes;
-- counters stay, `last_error` goes.
-- KEYS[1] = dead, KEYS[2] = pending, KEYS[3] = the queue base root
-- ARGV[1] = budget, members examined at most; ARGV[2] = bytes read at most;
--   ARGV[3], ARGV[4] = the place (score, member) the previous step ended at ('' = the
--   start); ARGV[5] = move only jobs dead at or before this time (epoch ms; '' = any:
--   the run's start, so a job that dies again during the run is not moved again); ARGV[6] = jobs moved at most ('' = the budget);
--   ARGV[7] = '1' to answer the ids moved
-- returns {score, member, more, moved, ghosts, bad, foreign, ids}: the place of the
-- last member examined and more = 1 while members within the death time follow it;
-- the jobs moved; the ghosts (members with no row) dropped from dead; the bad rows
-- (a field no transition can read, or their lane's meta) left in dead with a
-- `bad_row` event; the list of foreign ids (ids.lua `foreign_id`, each `reported_id`)
-- left in dead with a `bad_row` event; the ids moved (when asked, else {}). Every
-- member examined costs one of the budget, whatever becomes of it, and the next step
-- starts after it: a run walks each member once. Bounded: at most ARGV[1] members
-- (one HMGET each, and a moved job's HDEL, HSET and event; the set moves of a step
-- are one ZREM per 500 and one ZADD per 500 jobs), about ARGV[2] bytes read; dead is
-- read a chunk at a time (one member, then twice as many up to 8, within the bytes
-- left at the longest id yet: includes/chunks.lua), so a step of one job on a clean
-- head reads one member.
-- @reprocess_dead_check answers the same and writes nothing.
--@include common
--@include lanes
--@include reprocess
--@include dead_step
local dead, pending, base = KEYS[1], KEYS[2], KEYS[3]
local gone, flat = {}, {}
local out, start = dead_step(dead, base, ARGV, {
  move = function(id, g, jk)
    gone[#gone + 1] = id
    reprocess_row(base, id, g, jk)
    if not g then
      flat[#flat + 1] = 0
      flat[#flat + 1] = id
    end
  end,
  ghost = function(id) gone[#gone + 1] = id end,
  bad = function(id, refused) skipped_bad_row(base, 'reprocess', id, refused) end,
  foreign = function(id) skipped_bad_row(base, 'reprocess', reported_id(id), {err = 'foreign id'}) end,
})
-- the step's set moves: out of dead (by rank when every member examined leaves, the
-- usual case), the flat ones into pending at 0 (slices of 500 members keep unpack well
-- inside Lua's stack)
if out[6] == 0 and #out[7] == 0 and #gone > 0 then
  redis.call('ZREMRANGEBYRANK', dead, start, start + #gone - 1)
else
  for s = 1, #gone, 500 do redis.call('ZREM', dead, unpack(gone, s, math.min(s + 499, #gone))) end
end
for s = 1, #flat, 1000 do redis.call('ZADD', pending, unpack(flat, s, math.min(s + 999, #flat))) end
return out
