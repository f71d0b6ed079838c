-- the walk every bulk move of a sorted set shares (@promote, @expire, @reprocess_dead
-- and its dry run; reads only): the members after a place (score, member) the previous call
-- ended at (includes/cursor.lua), scored at most a bound, examined one by one until
-- a budget of members or of bytes is spent. Ghosts, bad rows and foreign ids each
-- cost their member like a job moved, so a call's work is bounded whatever the set
-- holds; and the next call starts after the last member examined, so a run walks
-- each member once, however many it leaves where it is.
--@include cursor

-- at most `n` members of `set` after the place (score, member) ('' = the start),
-- scored at most `bound`, each followed by its score (as WITHSCORES answers); and
-- the rank of the first
local function members_after(set, score, member, bound, n)
  if score == '' then
    return redis.call('ZRANGEBYSCORE', set, '-inf', bound, 'WITHSCORES', 'LIMIT', 0, n), 0
  end
  -- those at the place's own score that sort before the place are stepped over
  local start = rank_after(set, score, member)
  local skip = start - redis.call('ZCOUNT', set, '-inf', '(' .. score)
  return redis.call('ZRANGEBYSCORE', set, score, bound, 'WITHSCORES', 'LIMIT', skip, n), start
end

-- walk `set` from the place argv[3], argv[4] within `bound`: visit(id) examines one
-- member and answers the bytes it read or wrote; the walk stops once argv[1] members
-- are examined, argv[2] bytes spent, or full() is true (checked before each member).
-- With `most` (a step that moves at most `most` jobs, fewer than argv[1]) the members
-- are read `most` + 1 at first, and more (twice as many each time, up to argv[1]) only
-- when those examined left jobs unmoved: a step of one job on a clean head reads two
-- members, and one past bad rows still examines up to argv[1] of them in its call.
-- Answers {score, member, more}: the place of the last member examined (the old place
-- when none was), more = 1 while members within the bound follow it; and the rank of
-- the first member examined (the ones examined hold the ranks from it while visit
-- changes nothing in `set`).
local function walk(set, argv, bound, visit, full, most)
  local budget, bytes = tonumber(argv[1]), tonumber(argv[2])
  -- members this step examines before it reads more; one more is read to know `more`
  local cap = budget
  if most and most < budget then cap = math.max(most, 1) end
  local batch, start = members_after(set, argv[3], argv[4], bound, cap + 1)
  local n, examined, spent = #batch / 2, 0, 0
  while true do
    while examined < n and examined < cap and spent < bytes and not (full and full()) do
      examined = examined + 1
      spent = spent + visit(batch[2 * examined - 1])
    end
    -- read on only when all `cap` were examined, another follows, and the step may go on
    if examined < cap or n <= cap or cap >= budget or spent >= bytes or (full and full()) then break end
    -- the members at the ranks that follow (by rank: no walk over ties), within the bound
    local grown = math.min(2 * cap, budget)
    local page = redis.call('ZRANGE', set, start + n, start + grown, 'WITHSCORES')
    local top = bound == '+inf' and math.huge or tonumber(bound)
    for k = 1, #page, 2 do
      if tonumber(page[k + 1]) > top then break end
      batch[2 * n + 1], batch[2 * n + 2], n = page[k], page[k + 1], n + 1
    end
    cap = grown
  end
  local more = n > examined and 1 or 0
  if examined == 0 then return {argv[3], argv[4], more}, start end
  return {batch[2 * examined], batch[2 * examined - 1], more}, start
end
