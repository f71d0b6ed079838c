-- @reprocess_dead_check -- the dry run of @reprocess_dead: one bounded step of the
-- same walk with the same rules, writing nothing.
--@readonly
-- KEYS[1] = dead, KEYS[2] = pending, KEYS[3] = the queue base root
-- ARGV as @reprocess_dead's
-- returns {score, member, more, moved, ghosts, bad, foreign, ids}, as @reprocess_dead
-- would answer on this state: the jobs it would move, the ghosts it would drop, the
-- bad rows and foreign ids it would leave in dead. Bounded as @reprocess_dead.
--@include dead_step
return (dead_step(KEYS[1], KEYS[3], ARGV))
