-- @reprocess_dead -- move dead jobs back, oldest death first, bounded (extension).
-- Flat jobs to pending at score 0, grouped ones to their lanes; counters stay.
-- KEYS[1] = dead, KEYS[2] = pending, KEYS[3] = the queue base root ; ARGV[1] = budget
-- returns {n, more}: n jobs moved (at most the budget), more = 1 while the dead
-- set holds members past the ones skipped. A ghost (a member with no row) leaves
-- the set, uncounted; a bad row (or its lane's meta) is skipped and left in dead,
-- with a `bad_row` event, and costs no budget: it never holds the loop up.
-- Each job costs one read (dead_member_refusal) and its row's writes; the set
-- moves of a batch are one ZREM and one ZADD per 500 jobs.
--@include common
--@include lanes
--@include reprocess
local dead, pending, base = KEYS[1], KEYS[2], KEYS[3]
local budget = tonumber(ARGV[1])
local moved, skipped = 0, 0
-- ZREM the batch's members from dead, ZADD the flat ones to pending at 0
local function move_sets(gone, flat)
  for s = 1, #gone, 500 do redis.call('ZREM', dead, unpack(gone, s, math.min(s + 499, #gone))) end
  for s = 1, #flat, 1000 do redis.call('ZADD', pending, unpack(flat, s, math.min(s + 999, #flat))) end
end
while moved < budget do
  -- the skipped bad rows hold the first ranks: every member before them has left
  local ids = redis.call('ZRANGE', dead, skipped, skipped + budget - moved - 1)
  if #ids == 0 then break end
  local gone, flat = {}, {}
  for _, id in ipairs(ids) do
    local refused, g = dead_member_refusal(base, id)
    if refused == nil then
      gone[#gone + 1] = id
      reprocess_row(base, id, g)
      if not g then flat[#flat + 1] = 0; flat[#flat + 1] = id end
      moved = moved + 1
    elseif refused == -1 then
      gone[#gone + 1] = id
    else
      skipped = skipped + 1
      skipped_bad_row(base, 'reprocess', id, refused)
    end
  end
  move_sets(gone, flat)
end
return {moved, redis.call('ZCARD', dead) > skipped and 1 or 0}
