-- @remove_job2 -- remove one job from whichever of the four sets holds it and,
-- for a grouped job, from its lane (its active slot given back when in flight).
-- KEYS[1] = the row, KEYS[2] = the queue base root ; ARGV[1] = id, ARGV[2] = dedup key ('' = none)
-- returns 1; -1 for a missing row; EMQSTATE locked (a :lock key or a lock field)
--@include common
--@include lanes
--@include remove
local r = remove_one(KEYS[2], ARGV[1], ARGV[2])
if r == 0 then return redis.error_reply('EMQSTATE locked') end
return r
