-- The ends of a sorted set as a watching look reads them (health's sample, the lanes'
-- heads), no member copied that was not measured first: no command answers a member's
-- length and reading one copies it whole (a head of 30 MB another node wrote held Valkey
-- 50 to 58 ms read in a script), and a score is found without reading its member.

-- members before the one measured at most (`readable_at`): MEMORY USAGE walks them,
-- about 2.5 ns each on Valkey 9 (10,000: 25 us, and a rank takes two walks)
local MEASURED_RANK = 10000
-- a set of at most so many members is measured whole, each member walked (4,096 in
-- about 10 us): the usual set, whose every member is then read as before, no search
local WHOLE_WALK = 4096

-- what a look knows of sorted set `key`'s members before reading any, asked once a set:
-- `n` members (ZCARD, unless the caller counted them: `n`; 0: none, or a key of another
-- type); `all`, true when every member may be read: MEMORY USAGE ... SAMPLES n of a set
-- of at most WHOLE_WALK members is all its bytes, within `most`; else `usage`, MEMORY
-- USAGE ... SAMPLES 1 (O(1)). Where MEMORY can not be asked (the embedded fake; an ACL
-- user without it) `free` says whether every member may be read all the same: only when
-- `measured_only` is false (the fake: this process's own memory, no server to hold)
local function probe(key, most, measured_only, n)
  n = n or redis.pcall('ZCARD', key)
  if type(n) ~= 'number' or n == 0 then return {n = 0} end
  local walked = n <= WHOLE_WALK
  local usage = redis.pcall('MEMORY', 'USAGE', key, 'SAMPLES', tostring(walked and n or 1))
  if type(usage) ~= 'number' then return {key = key, n = n, free = not measured_only} end
  local p = {key = key, n = n, most = most, usage = usage}
  if walked then
    if usage <= most then
      p.all = true
    else
      p.usage = redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '1')
    end
  elseif redis.call('OBJECT', 'ENCODING', key) == 'listpack' then
    -- more members than WHOLE_WALK in a listpack (an operator raised
    -- zset-max-listpack-entries): its one figure is all its bytes, and a search would
    -- walk it whole at each step (`searchable`)
    p.listpack = true
    p.all = usage <= most
  end
  return p
end

-- true when the scores of probed set `p` may be searched by ZCOUNTs (`top_score`,
-- `bottom_score`): each is O(log n) in a skiplist, but walks a listpack, and a listpack
-- of 1,000,000 members (RESTOREd under a raised zset-max-listpack-entries) cost a look's
-- searches 87 ms of Valkey; one of at most WHOLE_WALK members costs a step about 10 us
local function searchable(p)
  return not p.listpack
end

-- true when every member of probed set `p` may be read
local function all_readable(p)
  if p.free ~= nil then return p.free end
  return p.all == true
end

-- true for member `rank` (0: the head) of probed set `p` a look may read; else false
-- and its bytes as measured (-1: not measurable). A skiplist's MEMORY USAGE ... SAMPLES
-- k is the mean of its first k members (each with its node) times its count, plus the
-- set's own bytes (Valkey's objectComputeSize walks from the head): the head's bytes are
-- at most the one figure (about it over the count), a later member's two figures apart
-- (a rank past MEASURED_RANK is not measured); a listpack's figure is all its bytes
local function readable_at(p, rank)
  if p.free ~= nil then
    if p.free then return true end
    return false, -1
  end
  if p.all or (rank == 0 and p.usage <= p.most) then return true end
  local size
  if p.listpack or redis.call('OBJECT', 'ENCODING', p.key) == 'listpack' then
    size = p.usage
  elseif rank == 0 then
    size = math.ceil(p.usage / p.n)
  elseif rank < MEASURED_RANK then
    local upto = redis.call('MEMORY', 'USAGE', p.key, 'SAMPLES', tostring(rank + 1))
    local before = redis.call('MEMORY', 'USAGE', p.key, 'SAMPLES', tostring(rank))
    size = math.max(0, math.ceil((upto * (rank + 1) - before * rank) / p.n))
  else
    return false, -1
  end
  if size <= p.most then return true end
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
