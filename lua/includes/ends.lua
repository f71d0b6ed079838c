-- The ends of a sorted set as a watching look reads them (health's sample, the lanes'
-- heads), no member copied that was not measured first: no command answers a member's
-- length and reading one copies it whole (a head of 30 MB another node wrote held Valkey
-- 50 to 58 ms read in a script), and a score is found without reading its member.

-- members before the one measured at most (`member_bytes`): MEMORY USAGE walks them,
-- about 20 ns each
local MEASURED_RANK = 10000

-- the bytes member `rank` (0: the head) of sorted set `key`, of `n` members, holds at
-- most, known without reading it: MEMORY USAGE ... SAMPLES k of a skiplist is the mean
-- of its first k members (each with its node) times `n`, plus the set's own bytes
-- (Valkey's objectComputeSize walks from the head), so two figures give member `rank`'s
-- bytes and a few dozen more; a listpack's figure is all its bytes, every member's
-- bound. -1 when it can not be known: a rank past MEASURED_RANK, no MEMORY USAGE (the
-- embedded fake, an ACL user without it); the caller reads none of those on a server
local function member_bytes(key, n, rank)
  if rank >= MEASURED_RANK then return -1 end
  local upto = redis.pcall('MEMORY', 'USAGE', key, 'SAMPLES', rank + 1)
  if type(upto) ~= 'number' then return -1 end
  if redis.call('OBJECT', 'ENCODING', key) ~= 'skiplist' then return upto end
  local before = 0
  if rank > 0 then before = redis.call('MEMORY', 'USAGE', key, 'SAMPLES', rank) end
  return math.max(0, math.ceil((upto * (rank + 1) - before * rank) / n))
end

-- true for member `rank` of `key` (of `n` members) a look may read: measured within
-- `most` bytes, or anything when `measured_only` is false (the embedded fake, this
-- process's own memory: no MEMORY command, and no server to hold); else false and its
-- bytes as measured (-1: not measurable)
local function readable(key, n, rank, most, measured_only)
  local size = member_bytes(key, n, rank)
  if size >= 0 and size <= most then return true end
  if size < 0 and not measured_only then return true end
  return false, size
end

-- a search seeks whole scores up to 2^53, each exact in a double: every score the
-- toolkit writes (a time in ms, a priority) is one
local SCORE_SPAN = 9007199254740992

local function score_text(x) return string.format('%.17g', x) end

-- true when sorted set `key` holds a score at or above `x` (`open`: above it)
local function any_above(key, x, open)
  local from = score_text(x)
  if open then from = '(' .. from end
  return redis.call('ZCOUNT', key, from, '+inf') > 0
end

-- the span a time is found within, at least, when `near` (ms): "under a minute ago"
local NEAR = 1024

-- the highest score of non-empty sorted set `key`, found by ZCOUNTs (each O(log n)),
-- never by reading its member: nothing measures a skiplist's tail. The search starts at
-- `from` (a guess: the head's score, the time now) and steps away from it `step`, then
-- `grow` times further each time, until it has the score between two steps, then halves
-- that span while it is wider than 1, or, when `near` (a time: "2 h ago" needs no
-- millisecond), than NEAR and a 64th of the score's distance from `from`. So a queue of one
-- priority costs one ZCOUNT, a few priorities a few, the newest of a dead set about 15.
-- Answers a whole number at or below the score (the score itself when it is whole and
-- not `near`); nil past 2^53 either way (only another node writes such a score)
local function top_score(key, from, step, grow, near)
  local lo, hi
  from = math.floor(from)
  if any_above(key, from, true) then
    lo = from
    repeat
      if lo + step > SCORE_SPAN then return nil end
      if any_above(key, lo + step, true) then lo, step = lo + step, step * grow else hi = lo + step end
    until hi
  else
    hi = from
    repeat
      if hi - step < -SCORE_SPAN then return nil end
      if any_above(key, hi - step, false) then lo = hi - step else hi, step = hi - step, step * grow end
    until lo
  end
  -- the score stays within [lo, hi]: some score is at or above lo, none above hi
  while hi - lo > 1 and not (near and hi - lo <= math.max(NEAR, (from - hi) / 64)) do
    local mid = math.floor((lo + hi) / 2)
    if any_above(key, mid, false) then lo = mid else hi = mid end
  end
  if hi - lo <= 1 and redis.call('ZCOUNT', key, score_text(hi), score_text(hi)) > 0 then return hi end
  return lo
end

-- the lowest score of non-empty sorted set `key`, to the whole number at or below it,
-- found by ZCOUNTs (55 at most) when its head can not be read; nil past 2^53
local function bottom_score(key)
  local lo, hi = -SCORE_SPAN, SCORE_SPAN
  if redis.call('ZCOUNT', key, '-inf', '(' .. score_text(lo)) > 0 then return nil end
  if redis.call('ZCOUNT', key, '-inf', score_text(hi)) == 0 then return nil end
  -- no score below lo, some at or below hi
  while hi - lo > 1 do
    local mid = math.floor((lo + hi) / 2)
    if redis.call('ZCOUNT', key, '-inf', score_text(mid)) > 0 then hi = mid else lo = mid end
  end
  if redis.call('ZCOUNT', key, score_text(lo), '(' .. score_text(hi)) > 0 then return lo end
  return hi
end
