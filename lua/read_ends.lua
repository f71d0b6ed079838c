-- @read_ends -- what health's sample reads at the ends of a queue's sets, no member copied unmeasured and no score read through its member; reads only.
--@readonly
-- One call a queue a watching look (health, a dashboard refresh) sends in place of the
-- native reads of pending's head and tail, the schedule's due head and the dead set's
-- newest: another node may put a member of many MB at any of them (a 30 MB head read
-- natively held Valkey 14 to 20 ms, in a script 50 to 58 ms). A member a look needs (an
-- id whose row's times it reads) is measured first (includes/ends.lua `member_bytes`:
-- MEMORY USAGE, O(its rank)) and read only within ARGV[2] bytes; a score alone is found
-- by ZCOUNTs (`end_score`), its member never read.
-- KEYS[1] = the queue base root
-- ARGV[1] = the due bound (ms): a scheduled job due at or before it is overdue;
--   ARGV[2] = the longest member read (bytes; emq_notebook/lanes.py HEAD_BYTES);
--   ARGV[3] = '1' to read only members measured within ARGV[2] (a server), '' to read
--   the ones that can not be measured too (the embedded fake: no MEMORY command)
-- returns {head, band, overdue, due, newest, place, bytes, ...}: head the id of
-- pending's first job; band the id of the first job of pending's highest score (its
-- lowest priority, the band served last; includes/ends.lua `end_score`, the score's
-- whole part) when other jobs come before it, and on a server only when fewer than
-- MEASURED_RANK do (no member further on is measured); overdue the scheduled jobs due at or
-- before ARGV[1]; due the lowest due time of the schedule when any is overdue; newest
-- the dead set's highest score (when the newest dead job died). Each nil when there is
-- none, when a score is past 2^53 (another node's), or when a key is of another type.
-- Then for each member not read, its place ('head', 'band') and its bytes as measured
-- (-1: not measurable: no MEMORY USAGE for this user).
--@include ends
local base, due_at, most, measured_only = KEYS[1], ARGV[1], tonumber(ARGV[2]), ARGV[3] == '1'
local pending, schedule, dead = base .. 'pending', base .. 'schedule', base .. 'dead'
local head, band, overdue, due, newest = false, false, false, false, false
local unread = {}

local function card(key)
  local n = redis.pcall('ZCARD', key)
  if type(n) ~= 'number' then return 0 end
  return n
end

-- member `rank` of `key` (of `n`) when a look may read it, else false and its place said
local function member(key, n, rank, place)
  local ok, size = readable(key, n, rank, most, measured_only)
  if ok then return redis.call('ZRANGE', key, rank, rank)[1] or false end
  unread[#unread + 1] = place
  unread[#unread + 1] = size
  return false
end

local n = card(pending)
if n > 0 then
  head = member(pending, n, 0, 'head')
  local top = end_score(pending, true)
  if top then
    local before = redis.call('ZCOUNT', pending, '-inf', '(' .. score_text(top))
    -- a band past MEASURED_RANK is not sampled on a server: its first member can not be
    -- measured cheaply (the figure stays a lower bound, as health says)
    if before > 0 and (before < MEASURED_RANK or not measured_only) then
      band = member(pending, n, before, 'band')
    end
  end
end
if card(schedule) > 0 then
  overdue = redis.call('ZCOUNT', schedule, '-inf', due_at)
  if overdue > 0 then due = end_score(schedule, false) or false end
end
if card(dead) > 0 then newest = end_score(dead, true) or false end
local out = {head, band, overdue, due, newest}
for i = 1, #unread do out[#out + 1] = unread[i] end
return out
