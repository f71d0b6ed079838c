-- @reprocess_jobs -- move the given dead jobs back, one bounded step (extension): flat
-- ones to pending at score 0, grouped ones to their lanes; counters stay, `last_error` goes.
-- KEYS[1] = dead, KEYS[2] = pending, KEYS[3] = the queue base root
-- ARGV[1] = budget, ids examined at most; ARGV[2] = bytes read at most; ARGV[3...] = ids
-- returns one word per id examined, in order: 'reprocessed'; 'gone' (no row);
-- 'not_dead' (not in dead); 'bad_row' (a field no transition can read: left in dead,
-- with a `bad_row` event); 'foreign_id' (ids.lua `foreign_id`: never
-- addressed). The step ends once either budget is spent, after one id at
-- least: the caller sends the ids past the last word again. Each id costs one HMGET
-- and one ZSCORE, and a moved job its writes.
-- @reprocess_jobs_check answers the same words and writes nothing.
--@include common
--@include lanes
--@include reprocess
local dead, pending, base = KEYS[1], KEYS[2], KEYS[3]
local seen = {}
return each_id(ARGV, function(id)
  local word, said, bytes = reprocess_word(base, id, dead, seen)
  -- this job's checks have run: now its writes (`said` is its group, or the refusal)
  if word == 'reprocessed' then
    redis.call('ZREM', dead, id)
    if not said then redis.call('ZADD', pending, 0, id) end
    reprocess_row(base, id, said)
  elseif word == 'bad_row' then
    skipped_bad_row(base, 'reprocess', id, said)
  end
  return word, 1, bytes
end)
