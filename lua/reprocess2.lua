-- @reprocess2 -- move one dead job back to pending (a grouped one to its lane).
-- KEYS[1] = the row, KEYS[2] = dead, KEYS[3] = pending, KEYS[4] = the queue base
-- ARGV[1] = id
-- returns 1; -1 for a missing row; EMQSTATE not dead for a job not in dead;
-- EMQSTATE bad row <field> in <where>. Every check runs before the first write.
--@include common
--@include lanes
--@include reprocess
local refused = reprocess_refusal(KEYS[4], ARGV[1], KEYS[2], true)
if refused then return refused end
reprocess_move(KEYS[4], ARGV[1], KEYS[2], KEYS[3])
return 1
