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
-- are examined (or `most`, when given and fewer: a step that moves at most `most` jobs
-- reads no more members than that), argv[2] bytes spent, or full() is true (checked
-- before each member).
-- Answers {score, member, more}: the place of the last member examined (the old place
-- when none was), more = 1 while members within the bound follow it; and the rank of
-- the first member examined (the ones examined hold the ranks from it while visit
-- changes nothing in `set`).
local function walk(set, argv, bound, visit, full, most)
  local budget, bytes = tonumber(argv[1]), tonumber(argv[2])
  if most and most < budget then budget = math.max(most, 1) end
  local batch, start = members_after(set, argv[3], argv[4], bound, budget + 1)
  local n, examined, spent = #batch / 2, 0, 0
  while examined < n and examined < budget and spent < bytes and not (full and full()) do
    examined = examined + 1
    spent = spent + visit(batch[2 * examined - 1])
  end
  local more = n > examined and 1 or 0
  if examined == 0 then return {argv[3], argv[4], more}, start end
  return {batch[2 * examined], batch[2 * examined - 1], more}, start
end
