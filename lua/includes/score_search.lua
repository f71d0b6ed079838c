-- the highest and lowest scores of a sorted set found by ZCOUNTs (each O(log n) in a
-- skiplist), never by reading a member: nothing measures a skiplist's tail. Reads only.

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
  -- a guess past the span (another node's score: -inf, -1e300) starts at its edge, or
  -- the steps never leave it (a step of 1 lost in -1e300; -inf + inf is no number)
  from = math.floor(math.max(-SCORE_SPAN, math.min(SCORE_SPAN, from)))
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

-- the highest score of sorted set `key` exactly, from `whole`, the whole number at or
-- below it (`top_score`): itself, or a fraction above it (another node's priority of 0.5)
-- found by halving [whole, whole + 1] down to adjacent doubles (53 ZCOUNTs at most)
local function exact_top(key, whole)
  if redis.call('ZCOUNT', key, '(' .. score_text(whole), '+inf') == 0 then return whole end
  local lo, hi = whole, whole + 1
  while true do
    local mid = (lo + hi) / 2
    if mid <= lo or mid >= hi then break end
    if any_above(key, mid, false) then lo = mid else hi = mid end
  end
  if redis.call('ZCOUNT', key, score_text(hi), score_text(hi)) > 0 then return hi end
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
