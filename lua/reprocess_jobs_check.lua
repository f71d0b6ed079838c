-- @reprocess_jobs_check -- the dry run of @reprocess_jobs: the word each id would get.
--@readonly
-- KEYS[1] = dead, KEYS[2] = pending, KEYS[3] = the queue base root ; ARGV as
-- @reprocess_jobs's
-- returns one word per id examined, as @reprocess_jobs would answer on this state:
-- 'reprocessed', 'gone', 'not_dead', 'bad_row' or 'foreign_id'; a step ends where
-- @reprocess_jobs's would. Writes nothing.
--@include refusals
local dead, base = KEYS[1], KEYS[3]
local seen = {}
return each_id(ARGV, function(id)
  local word, _, bytes = reprocess_word(base, id, dead, seen)
  return word, 1, bytes
end)
