-- @read_ends -- what health's sample reads at the ends of a queue's sets, no member copied unmeasured and no score read through its member; reads only.
--@readonly
-- One call a queue a watching look (health, a dashboard refresh) sends in place of the
-- native reads of pending's head and tail, the schedule's due head and the dead set's
-- newest: another node may put a member of many MB at any of them (a 30 MB head read
-- natively held Valkey 14 to 20 ms, in a script 50 to 58 ms). A member is measured
-- before it is read (includes/ends.lua `member_bytes`: MEMORY USAGE, O(its rank)) and
-- read only within ARGV[2] bytes; a score whose member can not be measured (a
-- skiplist's tail) is found by ZCOUNTs (`top_score`, `bottom_score`), its member never
-- read. A listpack's members are all measured by its one figure.
-- KEYS[1] = the queue base root
-- ARGV[1] = the due bound (ms): a scheduled job due at or before it is overdue;
--   ARGV[2] = the longest member read (bytes; emq_notebook/lanes.py HEAD_BYTES);
--   ARGV[3] = '1' to read only members measured within ARGV[2] (a server), '' to read
--   the ones that can not be measured too (the embedded fake: no MEMORY command);
--   ARGV[4] = the time now (ms), where the search for the newest dead job starts
-- returns {head, band, overdue, due, newest, place, bytes, ...}: head the id of
-- pending's first job; band the id of the first job of pending's highest score (its
-- lowest priority, the band served last; the score's whole part) when other jobs come
-- before it, and on a server only when fewer than MEASURED_RANK do (no member further
-- on is measured); overdue the scheduled jobs due at or before ARGV[1]; due the lowest
-- due time of the schedule when any is overdue; newest when the newest dead job died
-- (the dead set's highest score, within a 64th of its age). Each nil when there is
-- none, when a score is past 2^53 (another node's), or when a key is of another type.
-- Then for each member not read, its place ('head', 'band') and its bytes as
-- measured (-1: not measurable: no MEMORY USAGE for this user). Costs a handful of
-- commands for a queue of one priority, about 15 ZCOUNTs more for a dead set.
--@include ends
local base, due_at, most, measured_only = KEYS[1], ARGV[1], tonumber(ARGV[2]), ARGV[3] == '1'
local now = tonumber(ARGV[4])
local pending, schedule, dead = base .. 'pending', base .. 'schedule', base .. 'dead'
local head, band, overdue, due, newest = false, false, false, false, false
local unread = {}

local function card(key)
  local n = redis.pcall('ZCARD', key)
  if type(n) ~= 'number' then return 0 end
  return n
end

-- {member, score} at `rank` of `key` (of `n`) when a look may read it; else nil, its
-- place said (none: only its score is wanted, found without it)
local function member(key, n, rank, place)
  local ok, size = readable(key, n, rank, most, measured_only)
  if ok then
    local got = redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')
    if got[1] then return {got[1], tonumber(got[2])} end
    return nil
  end
  if place then
    unread[#unread + 1] = place
    unread[#unread + 1] = size
  end
  return nil
end

-- a score read as a whole number at or below it; nil past 2^53 (another node's)
local function whole(x)
  if not x or x ~= x or x > SCORE_SPAN or x < -SCORE_SPAN then return nil end
  return math.floor(x)
end

-- true when every member of `key` is within ARGV[2] bytes (a listpack measured whole)
local function all_small(key)
  local size = redis.pcall('MEMORY', 'USAGE', key, 'SAMPLES', '1')
  return type(size) == 'number' and size <= most and redis.call('OBJECT', 'ENCODING', key) == 'listpack'
end

local n = card(pending)
if n > 0 then
  local first = member(pending, n, 0, 'head')
  local top
  if all_small(pending) or not measured_only then
    local last = redis.call('ZRANGE', pending, -1, -1, 'WITHSCORES')
    top = whole(tonumber(last[2]))
  elseif first then
    top = top_score(pending, first[2], 1, 2, false)
  else
    local low = bottom_score(pending)
    if low then top = top_score(pending, low, 1, 2, false) end
  end
  if first then head = first[1] end
  if top then
    local before = redis.call('ZCOUNT', pending, '-inf', '(' .. score_text(top))
    -- a band past MEASURED_RANK is not sampled on a server: its first member can not be
    -- measured cheaply (the figure stays a lower bound, as health says)
    if before > 0 and (before < MEASURED_RANK or not measured_only) then
      local got = member(pending, n, before, 'band')
      if got then band = got[1] end
    end
  end
end
local scheduled = card(schedule)
if scheduled > 0 then
  overdue = redis.call('ZCOUNT', schedule, '-inf', due_at)
  if overdue > 0 then
    local first = member(schedule, scheduled, 0, nil)
    if first then due = whole(first[2]) or false else due = bottom_score(schedule) or false end
  end
end
local dead_n = card(dead)
if dead_n > 0 then
  if all_small(dead) or not measured_only then
    local last = redis.call('ZRANGE', dead, -1, -1, 'WITHSCORES')
    newest = whole(tonumber(last[2])) or false
  else
    newest = top_score(dead, now, 1024, 4, true) or false
  end
end
local out = {head, band, overdue, due, newest}
for i = 1, #unread do out[#out + 1] = unread[i] end
return out
