-- a resumable place in a sorted set, kept as (score, member) rather than as a rank,
-- so a scan in bounded calls stays right while members come and go: each call starts
-- just after the last member the previous one examined, wherever that place is now.
-- Reads only.

-- true when member `a` sorts after `b` at an equal score: byte order, as the set
-- keeps it (Lua's own `>` on strings follows the server's locale)
local function sorts_after(a, b)
  if a == b then return false end
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x > y end
  end
  return #a > #b
end

-- the rank of the first member after the place (score, member); score '' is the start
local function rank_after(key, score, member)
  if score == '' then return 0 end
  local now = redis.call('ZSCORE', key, member)
  if now and tonumber(now) == tonumber(score) then return redis.call('ZRANK', key, member) + 1 end
  -- the member left (or moved): every member scored below the place precedes it, every
  -- one scored above follows it; among those of its score, byte order decides
  local lo = redis.call('ZCOUNT', key, '-inf', '(' .. score)
  local hi = redis.call('ZCOUNT', key, '-inf', score)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if sorts_after(redis.call('ZRANGE', key, mid, mid)[1], member) then hi = mid else lo = mid + 1 end
  end
  return lo
end

-- a reply's head after examining the first `examined` members of `batch` (a
-- ZRANGE WITHSCORES from rank `start`): the place of the last one examined (the
-- next call's cursor; the old place when none was) and 1 while members follow it
local function cursor_head(key, batch, examined, start, score, member)
  local more = redis.call('ZCARD', key) > start + examined and 1 or 0
  if examined == 0 then return {score, member, more} end
  return {batch[2 * examined], batch[2 * examined - 1], more}
end
