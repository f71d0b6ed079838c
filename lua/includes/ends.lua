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

-- a bisection seeks whole scores up to 2^53, each exact in a double: every score the
-- toolkit writes (a time in ms, a priority) is one
local SCORE_SPAN = 9007199254740992

local function score_text(x) return string.format('%.17g', x) end

-- the highest (`top`) or lowest score of non-empty sorted set `key`, to the whole number
-- at or below it, found by ZCOUNTs (55 at most, each O(log n)), never by reading a
-- member: nothing measures a skiplist's tail. nil for a score past 2^53 either way
-- (only another node writes one)
local function end_score(key, top)
  local lo, hi = -SCORE_SPAN, SCORE_SPAN
  local beyond
  if top then
    beyond = redis.call('ZCOUNT', key, '(' .. score_text(hi), '+inf')
  else
    beyond = redis.call('ZCOUNT', key, '-inf', '(' .. score_text(lo))
  end
  if beyond > 0 or redis.call('ZCOUNT', key, score_text(lo), score_text(hi)) == 0 then return nil end
  -- the score sought stays within [lo, hi]
  while hi - lo > 1 do
    local mid = math.floor((lo + hi) / 2)
    if top then
      if redis.call('ZCOUNT', key, score_text(mid), '+inf') > 0 then lo = mid else hi = mid end
    else
      if redis.call('ZCOUNT', key, '-inf', score_text(mid)) > 0 then hi = mid else lo = mid end
    end
  end
  if top then
    if redis.call('ZCOUNT', key, score_text(hi), score_text(hi)) > 0 then return hi end
    return lo
  end
  if redis.call('ZCOUNT', key, score_text(lo), '(' .. score_text(hi)) > 0 then return lo end
  return hi
end
