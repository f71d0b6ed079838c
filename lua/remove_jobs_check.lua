-- @remove_jobs_check -- the dry run of @remove_jobs: the word each id would get.
--@readonly
-- KEYS[1] = the queue base root ; ARGV = ids
-- returns one word per id, as @remove_jobs would answer on this state: 'removed',
-- 'gone' or 'locked'. Writes nothing.
--@include refusals
local out = {}
for i, id in ipairs(ARGV) do out[i] = remove_word(KEYS[1], id) end
return out
