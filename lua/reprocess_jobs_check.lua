-- @reprocess_jobs_check -- the dry run of @reprocess_jobs: the word each id would get.
--@readonly
-- KEYS[1] = dead, KEYS[2] = pending, KEYS[3] = the queue base root ; ARGV = ids
-- returns one word per id, as @reprocess_jobs would answer on this state:
-- 'reprocessed', 'gone', 'not_dead' or 'bad_row'. Writes nothing.
--@include refusals
local dead, base = KEYS[1], KEYS[3]
local out = {}
for i, id in ipairs(ARGV) do out[i] = reprocess_word(base, id, dead) end
return out
