-- @repeat_run_now -- one job from a repeatable, now; its next due time is left as it
-- was, so the cadence is kept (extension).
-- KEYS[1] = the queue base root ; ARGV[1] = name, ARGV[2] = the new job's id
-- returns the id of the job produced; -1 when no repeatable has that name;
--   EMQSTATE bad row <field> in repeat <name> for a definition `readable` refuses or
--   over DEF_BYTES (never read); EMQSTATE bad row type (<type>) in <key> when a
--   registry key holds another type. A refusal writes nothing.
--@include common
--@include lanes
--@include enqueue_row
--@include repeat_def
local base, name, id = KEYS[1], ARGV[1], ARGV[2]
local misfit, held = registry_misfit(base)
if misfit then return bad_row('type (' .. held .. ')', misfit) end
local raw, size = definition(base, name)
if (not raw and size == 0) or not redis.call('ZSCORE', base .. 'repeat', name) then return -1 end
if not raw then return bad_row('definition (' .. size .. ' bytes)', 'repeat ' .. name) end
local def, bad = readable(raw)
if not def then return bad_row(bad, 'repeat ' .. name) end
-- every check has run: now the writes
add_job(base, id, def.payload, def.group or '', 0, 0, def.max_attempts, '', '1000', now_ms())
return id
