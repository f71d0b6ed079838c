-- @reprocess_dead -- move dead jobs back, oldest death first, bounded (extension).
-- Flat jobs to pending at score 0, grouped ones to their lanes; counters stay.
-- KEYS[1] = dead, KEYS[2] = pending, KEYS[3] = the queue base root ; ARGV[1] = budget
-- returns {n, more}: n jobs moved (at most the budget), more = 1 while the dead
-- set holds members past the ones skipped. A ghost (a member with no row) leaves
-- the set, uncounted; a bad row (or its lane's meta) is skipped and left in dead,
-- with a `bad_row` event, and costs no budget: it never holds the loop up.
--@include common
--@include lanes
--@include reprocess
local dead, pending, base = KEYS[1], KEYS[2], KEYS[3]
local budget = tonumber(ARGV[1])
local moved, skipped = 0, 0
while moved < budget do
  local ids = redis.call('ZRANGE', dead, skipped, skipped + budget - moved - 1)
  if #ids == 0 then break end
  for _, id in ipairs(ids) do
    local refused = reprocess_refusal(base, id, dead, true)
    if refused == nil then
      reprocess_move(base, id, dead, pending)
      moved = moved + 1
    elseif refused == -1 then
      redis.call('ZREM', dead, id)
    else
      skipped = skipped + 1
      skipped_bad_row(base, 'reprocess', id, refused)
    end
  end
end
return {moved, redis.call('ZCARD', dead) > skipped and 1 or 0}
