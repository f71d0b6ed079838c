-- @native_reprocess -- EMQ.REPROCESS semantics, for the function executor:
-- the handler tests dead membership with a READ before any write, and refuses a
-- grouped dead row (only the script carries a job back to its lane).
-- KEYS[1] = the row, KEYS[2] = dead, KEYS[3] = pending, KEYS[4] = the queue base
-- ARGV[1] = id
-- returns 1; -1 for a missing row; EMQSTATE not dead; EMQSTATE reprocess lane not native;
-- EMQSTATE bad row <field> in <id>
--@include common
--@include lanes
--@include reprocess
local refused = reprocess_refusal(KEYS[4], ARGV[1], KEYS[2], false)
if refused then return refused end
-- every check has run: now the writes, the same as @reprocess2 for a flat row
reprocess_move(KEYS[4], ARGV[1], KEYS[2], KEYS[3])
return 1
