-- @repeat_tick -- every due repeatable produces one job and moves its next due
-- time past now (missed beats are skipped, not replayed).
-- KEYS[1] = the queue base root
-- ARGV[1] = the place: the rank in the registry where the walk starts (what the last
--   call answered; 0 at first); ARGV[2...] = fresh job ids, one per job it may make
-- returns {place, id...}: the rank where the next call's walk starts, then the ids of
-- the jobs produced, one a repeatable at most; {0} when a registry key holds another
-- type than its own (`registry_misfit`, includes/repeat_def.lua: nothing read or
-- written, no event). A definition that does not read (`readable`,
-- includes/repeat_def.lua: not a JSON object, every / max_attempts not a whole number
-- >= 1, payload or group not text, a long one of another shape) or that is over
-- DEF_BYTES (never read) is skipped and left as it is; a `bad_row` event names the
-- repeatable as a report names an id (`reported_id`: a long name by its first 200 bytes
-- and its length), once while the definition stays as it is (`repeat:reported`,
-- includes/repeat_reported.lua: its problem, its length and its first and last bytes),
-- at most TICK_REPORTS a call, the rest in the calls after. A due name with no
-- definition is taken out of the registry.
-- Bounded by the work a call does, whatever another node wrote: at most TICK_NAMES due
-- names examined (made, skipped or taken out alike), read a chunk at a time
-- (`each_member`, includes/reads.lua), and about DEF_BYTES bytes of names (each counted
-- ID_WORK times: it is hashed at each key and member it names) and definitions read
-- (one at least; as `readable` counts them: one decoded whole DECODE_WORK times its
-- length). The walk starts at the place and, at the due names' end, goes on from the
-- head up to the place, so bad definitions due first (left where they are) hold the
-- rest back a call per TICK_NAMES of them, not for ever; the place answered is where the
-- walk stopped, the names it made or took out no longer counted. A place past the due
-- names (the registry changed since) starts the walk at the head. The registry is
-- written after the walk: each name is read once a call.
--@include common
--@include lanes
--@include enqueue_row
--@include repeat_def
--@include repeat_reported
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

-- whether `name`'s report is `as` already: its length asked first (HSTRLEN), so a report
-- another node made long is never copied (100 of 4 MB held a tick 279 ms)
local function marked_as(name, as)
  return redis.call('HSTRLEN', reported, name) == #as and redis.call('HGET', reported, name) == as
end

-- a bad definition, left as it is: reported unless its report was made already
-- (`as`: its problem, its length and its first and last bytes), TICK_REPORTS a call
local function skipped(name, why, as)
  kept = kept + 1
  if reported and marked > 0 and marked_as(name, as) then return end
  if reports == TICK_REPORTS then return end
  reports = reports + 1
  if reported then
    marks[#marks + 1] = name
    marks[#marks + 1] = as
  end
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
  moved[#moved + 1] = next_at
  moved[#moved + 1] = name
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

for i = 1, #moved, 2 * WRITE_CHUNK do
  redis.call('ZADD', registry, unpack(moved, i, math.min(i + 2 * WRITE_CHUNK - 1, #moved)))
end
for i = 1, #gone, WRITE_CHUNK do
  redis.call('ZREM', registry, unpack(gone, i, math.min(i + WRITE_CHUNK - 1, #gone)))
end
for i = 1, #unmarked, WRITE_CHUNK do
  redis.call('HDEL', reported, unpack(unmarked, i, math.min(i + WRITE_CHUNK - 1, #unmarked)))
end
if #marks > 0 then redis.call('HSET', reported, unpack(marks)) end
local out = {place}
for i = 1, #made do out[i + 1] = made[i] end
return out
