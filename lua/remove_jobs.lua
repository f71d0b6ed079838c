-- @remove_jobs -- remove many jobs by id, one bounded step (extension).
-- KEYS[1] = the queue base root
-- ARGV[1] = budget, work at most (an id costs 1, a removed job 2: its row, logs and
--   every set are written; a ghost 1 more for each lane it is looked for in);
--   ARGV[2] = bytes at most (an id's, the payload its delete frees, and a ghost's lane names
--   read, refusals.lua `ghost_lanes`); ARGV[3...] = ids
-- returns one word per id examined, in order: 'removed', 'gone', 'locked' (left
-- untouched) or 'foreign_id' (ids.lua `foreign_id`: never
-- addressed). The step ends once either budget is spent, after one id at least: the
-- caller sends the ids past the last word again. Rows and logs go by UNLINK.
-- @remove_jobs_check answers the same words and writes nothing.
--@include common
--@include lanes
--@include remove
local base = KEYS[1]
local words = {[1] = 'removed', [-1] = 'gone', [0] = 'locked'}
return each_id(ARGV, function(id)
  if foreign_id(id) then return 'foreign_id', 1, foreign_cost(id) end
  local r, work, bytes = remove_one(base, id, '')
  return words[r], work, bytes
end)
