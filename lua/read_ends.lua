-- @read_ends -- what health's sample reads at the ends of a queue's sets, no member copied unmeasured and no score read through its member; reads only.
--@readonly
-- One call a queue a watching look (health, a dashboard refresh) sends in place of the
-- native reads of pending's head and tail, the schedule's due head and the dead set's
-- newest: another node may put a member of many MB at any of them (a 30 MB head read
-- natively held Valkey 14 to 20 ms, in a script 50 to 58 ms). A member is measured
-- before it is read (includes/ends.lua `probe`, `readable_at`: MEMORY USAGE) and
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
-- none, when a score is past 2^53 (another node's), when a key is of another type, or
-- when a score would be searched in a listpack of more than WHOLE_WALK members (an
-- operator raised zset-max-listpack-entries: each ZCOUNT walks it whole).
-- Then for each member not read, its place ('head', 'band') and its bytes as
-- measured (-1: not measurable: no MEMORY USAGE for this user). Costs the reads it
-- replaces and a ZCARD and a MEMORY USAGE a set for the usual set (at most WHOLE_WALK
-- members, all within ARGV[2]: measured whole, then read as before); a larger one is
-- measured member by member, its scores found by ZCOUNTs (a dead set's newest: about 15).
--@include ends
local base, due_at, most, measured_only = KEYS[1], ARGV[1], tonumber(ARGV[2]), ARGV[3] == '1'
local now = tonumber(ARGV[4])
local head, band, overdue, due, newest = false, false, false, false, false
local unread = {}

-- {member, score} at `rank` of probed set `p` when a look may read it; else nil, and
-- its place said when given (none: only its score is wanted, found without it)
local function member(p, rank, place)
  local ok, size = readable_at(p, rank)
  if ok then
    local got = redis.call('ZRANGE', p.key, rank, rank, 'WITHSCORES')
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

-- the highest score of probed set `p`: its last member's when every member may be read
-- (the usual set), else found by ZCOUNTs from `from` (`top_score`)
local function top(p, from, step, grow, near)
  if all_readable(p) then
    return whole(tonumber(redis.call('ZRANGE', p.key, -1, -1, 'WITHSCORES')[2]))
  end
  if not searchable(p) then return nil end
  if from then return top_score(p.key, from, step, grow, near) end
  -- no lowest score within the span (one of -inf under it): the search starts at 0
  return top_score(p.key, bottom_score(p.key) or 0, step, grow, near)
end

local pending = probe(base .. 'pending', most, measured_only)
if pending.n > 0 then
  local first = member(pending, 0, 'head')
  if first then head = first[1] end
  if all_readable(pending) then
    -- the usual set: its last score and its band's first job read as before the guard
    local last = redis.call('ZRANGE', pending.key, -1, -1, 'WITHSCORES')[2]
    if last and first and whole(tonumber(last)) and tonumber(last) ~= first[2] then
      band = redis.call('ZRANGEBYSCORE', pending.key, last, last, 'LIMIT', 0, 1)[1] or false
    end
  else
    local last = top(pending, first and first[2], 1, 2, false)
    -- the band is the jobs of exactly the last score, which may be a fraction
    if last then last = exact_top(pending.key, last) end
    if last then
      local before = redis.call('ZCOUNT', pending.key, '-inf', '(' .. score_text(last))
      -- a band past MEASURED_RANK is not sampled on a server: its first member can not be
      -- measured cheaply (the figure stays a lower bound, as health says)
      if before > 0 and (before < MEASURED_RANK or pending.free) then
        local got = member(pending, before, 'band')
        if got then band = got[1] end
      end
    end
  end
end
local schedule = base .. 'schedule'
local scheduled = redis.pcall('ZCOUNT', schedule, '-inf', due_at)
if type(scheduled) == 'number' and scheduled > 0 then
  overdue = scheduled
  local p = probe(schedule, most, measured_only)
  local first = member(p, 0, nil)
  if first then
    due = whole(first[2]) or false
  elseif searchable(p) then
    due = bottom_score(schedule) or false
  end
end
local dead = probe(base .. 'dead', most, measured_only)
if dead.n > 0 then newest = top(dead, now, 1024, 4, true) or false end
local out = {head, band, overdue, due, newest}
for i = 1, #unread do out[#out + 1] = unread[i] end
return out
