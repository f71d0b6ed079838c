-- @remove_jobs_check -- the dry run of @remove_jobs: the word each id would get.
--@readonly
-- KEYS[1] = the queue base root ; ARGV as @remove_jobs's
-- returns one word per id examined, as @remove_jobs would answer on this state:
-- 'removed', 'gone', 'locked' or 'foreign_id'; a step ends where @remove_jobs's would.
-- Writes nothing.
--@include refusals
local base = KEYS[1]
return each_id(ARGV, function(id) return remove_word(base, id) end)
