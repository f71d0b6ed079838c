-- @reprocess_jobs -- move the given dead jobs back (extension): flat ones to pending at
-- score 0, grouped ones to their lanes; counters stay, `last_error` goes.
-- KEYS[1] = dead, KEYS[2] = pending, KEYS[3] = the queue base root ; ARGV = ids
-- returns one word per id: 'reprocessed'; 'gone' (no row); 'not_dead' (not in dead);
-- 'bad_row' (a field no transition can read: left in dead, with a `bad_row` event).
-- @reprocess_jobs_check answers the same words and writes nothing.
--@include common
--@include lanes
--@include reprocess
local dead, pending, base = KEYS[1], KEYS[2], KEYS[3]
local out = {}
for i, id in ipairs(ARGV) do
  local word, refused = reprocess_word(base, id, dead)
  -- this job's checks have run: now its writes
  if word == 'reprocessed' then
    reprocess_move(base, id, dead, pending)
  elseif word == 'bad_row' then
    skipped_bad_row(base, 'reprocess', id, refused)
  end
  out[i] = word
end
return out
