-- the walk every bulk move of a sorted set shares (@promote, @expire, @reprocess_dead
-- and its dry run; reads only): the members after a place (score, member) the previous call
-- ended at (includes/cursor.lua), scored at most a bound, examined one by one until
-- a budget of members or of bytes is spent. Ghosts, bad rows and foreign ids each
-- cost their member like a job moved, so a call's work is bounded whatever the set
-- holds; and the next call starts after the last member examined, so a run walks
-- each member once, however many it leaves where it is.
--@include cursor

-- walk `set` from the place argv[3], argv[4] within `bound`: visit(id) examines one
-- member and answers the bytes it read or wrote; the walk stops once argv[1] members
-- are examined, argv[2] bytes spent, or full() is true (checked before each member).
-- The members are read a chunk at a time (each_member, includes/chunks.lua): a step
-- of one job on a clean head reads one member, and a step past ids of 70 KB reads
-- about those its byte budget covers. visit must change nothing in `set` (the walk
-- reads on by rank): a caller takes members out after the walk.
-- Answers {score, member, more}: the place of the last member examined (the old place
-- when none was), more = 1 while members within the bound follow it; and the rank of
-- the first member examined (the ones examined hold the ranks from it).
local function walk(set, argv, bound, visit, full)
  local budget, bytes = tonumber(argv[1]), tonumber(argv[2])
  local start = rank_after(set, argv[3], argv[4])
  -- the members within the bound hold the ranks below this one
  local within = redis.call('ZCOUNT', set, '-inf', bound)
  local n, id, score = 0, nil, nil
  if not (full and full()) then
    n, id, score = each_member(set, start, math.min(within, start + budget), bytes, function(member)
      return visit(member), full and full()
    end)
  end
  local more = within > start + n and 1 or 0
  if n == 0 then return {argv[3], argv[4], more}, start end
  return {score, id, more}, start
end
