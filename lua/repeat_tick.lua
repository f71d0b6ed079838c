-- @repeat_tick -- every due repeatable produces one job and moves its next due
-- time past now (missed beats are skipped, not replayed).
-- KEYS[1] = the queue base root
-- ARGV[1] = the rank in the registry where the walk starts (what the last call
--   answered; 0 at first); ARGV[2...] = fresh job ids, one per job it may make
-- returns {place, id...}: the rank the next call starts at, then the ids of the jobs
--   made, one a repeatable at most; {0} when a registry key holds another type than its
--   own (nothing read or written). A definition `readable` refuses, or over DEF_BYTES
--   (never read), is left as it is and reported by a `bad_row` event naming the
--   repeatable (`reported_id`) once while it stays so, TICK_REPORTS a call; a due name
--   with no definition leaves the registry. Bounded: TICK_NAMES due names examined and
--   about DEF_BYTES bytes of names (ID_WORK each) and definitions read; the walk goes on
--   from the place, then from the head up to it, so bad definitions due first hold the
--   rest back a call per TICK_NAMES of them, not for ever.
--@include common
--@include lanes
--@include enqueue_row
--@include repeat_def
--@include repeat_reported
--@include slices

-- the due names one tick examines at most, whatever becomes of them
-- (emq_notebook.repeat.TICK_NAMES): each costs an HSTRLEN, an HGET and a decode
local TICK_NAMES = 500

local base = KEYS[1]
local from = whole_of(ARGV[1])
if not from or from < 0 then return redis.error_reply('ERR the place must be a whole number >= 0') end
if registry_misfit(base) then return {0} end
local registry = base .. 'repeat'
local now = now_ms()
local most = #ARGV - 1

-- what the tick has reported: nil when the key holds another type (never read or
-- written then); emptied when it names more repeatables than the registry holds (a
-- bad one another node took out by hand stays named there): those left are reported
-- once more
local reported = reported_key(base)
local marked = redis.pcall('HLEN', reported)
if type(marked) ~= 'number' then
  reported, marked = nil, 0
elseif marked > redis.call('ZCARD', registry) then
  redis.call('UNLINK', reported)
  marked = 0
end

local made, moved, gone, marks, unmarked = {}, {}, {}, {}, {}
-- the bad definitions the walk's current stretch left in place, and whether it met a
-- name not due
local kept, lapped, reports = 0, false, 0

-- a bad definition, left as it is: reported unless its report was made already
-- (`as`: its problem, its length and its first and last bytes), TICK_REPORTS a call
local function skipped(name, why, as)
  kept = kept + 1
  if reported and marked > 0 and reported_as(reported, name, as) then return end
  if reports == TICK_REPORTS then return end
  reports = reports + 1
  if reported then marks[#marks + 1], marks[#marks + 2] = name, as end
  emit(base, {event = 'bad_row', verb = 'tick', ['repeat'] = reported_id(name), error = why})
end

-- a name whose report, if any, no longer holds: made or taken out
local function unmark(name)
  if marked > 0 then unmarked[#unmarked + 1] = name end
end

-- one due name: its job made (and its next due time noted), or skipped, or noted gone;
-- answers the bytes it read and true once the call is done
local function visit(name, score)
  local at = tonumber(score)
  if at > now then
    lapped = true
    return 0, true
  end
  local raw, size = definition(base, name)
  if not raw and size == 0 then
    gone[#gone + 1] = name
    unmark(name)
    return id_cost(name), false
  end
  if not raw then
    local why = 'bad definition: ' .. size .. ' bytes, over ' .. DEF_BYTES
    skipped(name, why, why)
    return id_cost(name), false
  end
  local def, bad, work = readable(raw)
  -- a due time of -inf (set by hand) has no next beat
  if def and at == -math.huge then def, bad = nil, 'due' end
  if not def then
    local why = 'bad definition ' .. bad
    local head = size <= 64 and raw or string.sub(raw, 1, 32) .. string.sub(raw, -32)
    skipped(name, why, why .. ' ' .. size .. ' ' .. head)
    return id_cost(name) + work, false
  end
  local id = ARGV[#made + 2]
  add_job(base, id, def.payload, def.group or '', 0, 0, def.max_attempts, '', '1000', now)
  made[#made + 1] = id
  unmark(name)
  local next_at = at + (math.floor((now - at) / def.every) + 1) * def.every
  -- a due time far in the past (another node's -1e300) rounds to no later than now
  if next_at <= now then next_at = now + def.every end
  moved[#moved + 1], moved[#moved + 2] = next_at, name
  return id_cost(name) + work, #made == most
end

-- the walk over ranks `first` to before `last`, within what is left of the budget;
-- answers true when it ended the due names' stretch (a name not due, the registry's
-- end or `last`) with budget left, false when the budget ended it
local names, bytes = TICK_NAMES, DEF_BYTES
local function walk(first, last)
  kept, lapped = 0, false
  local n, _, _, spent = each_member(registry, first, math.min(last, first + names), bytes, visit)
  names, bytes = names - n, bytes - spent
  return lapped or (names > 0 and bytes > 0 and #made < most)
end

local place = from
if most > 0 then
  if not walk(from, math.huge) then
    -- the names made or taken out leave the due names, so the first one not examined
    -- is `kept` past the place
    place = from + kept
  elseif from == 0 or names == 0 or walk(0, from) then
    -- the lap is done (or no name is left to the call): the next starts at the head
    place = 0
  else
    place = kept
  end
end

in_slices('ZADD', registry, moved)
in_slices('ZREM', registry, gone)
in_slices('HDEL', reported, unmarked)
if #marks > 0 then redis.call('HSET', reported, unpack(marks)) end
local out = {place}
for i = 1, #made do out[i + 1] = made[i] end
return out
