-- @remove_jobs -- remove many jobs by id in one call (extension).
-- KEYS[1] = the queue base root ; ARGV = ids
-- returns one word per id: 'removed', 'gone' or 'locked' (locked ones untouched)
-- @remove_jobs_check answers the same words and writes nothing.
--@include common
--@include lanes
--@include remove
local words = {[1] = 'removed', [-1] = 'gone', [0] = 'locked'}
local out = {}
for i, id in ipairs(ARGV) do out[i] = words[remove_one(KEYS[1], id, '')] end
return out
