-- @repeat_tick -- every due repeatable produces one job and moves its next due
-- time past now (missed beats are skipped, not replayed).
-- KEYS[1] = the queue base root ; ARGV = fresh job ids, one per job it may make
-- returns the ids of the jobs produced: one a repeatable at most; none when a registry
-- key holds another type than its own (`registry_misfit`, includes/repeat_def.lua:
-- nothing read or written, no event). A definition that does not decode, or whose
-- every / max_attempts is not a whole number >= 1, or whose payload or group is not
-- text, or that is over DEF_BYTES (includes/repeat_def.lua: never read), is skipped and
-- left as it is, with a `bad_row` event naming the repeatable as a report names an id
-- (`reported_id`: a long name by its first 200 bytes and its length); a due name with
-- no definition is taken out of the registry.
-- Bounded by the work a call does, whatever another node wrote: at most TICK_NAMES due
-- names examined (made, skipped or taken out alike), read a chunk at a time
-- (`each_member`, includes/reads.lua), and about DEF_BYTES bytes of names (each counted
-- ID_WORK times: it is hashed at each key and member it names) and definitions read
-- (one at least). Every call walks the due set from its head, so more than TICK_NAMES
-- bad definitions due before the rest hold those behind them back until an operator
-- fixes or removes them (`%emq repeats` lists each with its problem); the rest wait for
-- the next tick. The registry is written after the walk: each name is read once a call.
--@include common
--@include lanes
--@include enqueue_row
--@include repeat_def
local base = KEYS[1]
if registry_misfit(base) then return {} end
local registry = base .. 'repeat'
local now = now_ms()

local made, moved, gone = {}, {}, {}

local function skipped(name, why)
  emit(base, {event = 'bad_row', verb = 'tick', ['repeat'] = reported_id(name), error = why})
end

-- one due name: its job made (and its next due time noted), or skipped, or noted gone;
-- answers the bytes it read and true once the call is done
local function visit(name, score)
  local at = tonumber(score)
  if at > now then return 0, true end
  local raw, size = definition(base, name)
  if not raw and size == 0 then
    gone[#gone + 1] = name
    return id_cost(name), false
  end
  if not raw then
    skipped(name, 'bad definition: ' .. size .. ' bytes, over ' .. DEF_BYTES)
    return id_cost(name), false
  end
  local def, bad = readable(raw)
  -- a due time of -inf (set by hand) has no next beat
  if def and at == -math.huge then def, bad = nil, 'due' end
  if not def then
    skipped(name, 'bad definition ' .. bad)
    return id_cost(name) + size, false
  end
  local id = ARGV[#made + 1]
  add_job(base, id, def.payload, def.group or '', 0, 0, def.max_attempts, '', '1000', now)
  made[#made + 1] = id
  local next_at = at + (math.floor((now - at) / def.every) + 1) * def.every
  -- a due time far in the past (another node's -1e300) rounds to no later than now
  if next_at <= now then next_at = now + def.every end
  moved[#moved + 1] = next_at
  moved[#moved + 1] = name
  return id_cost(name) + size, #made == #ARGV
end

if #ARGV > 0 then each_member(registry, 0, TICK_NAMES, DEF_BYTES, visit) end
for i = 1, #moved, 2 * WRITE_CHUNK do
  redis.call('ZADD', registry, unpack(moved, i, math.min(i + 2 * WRITE_CHUNK - 1, #moved)))
end
for i = 1, #gone, WRITE_CHUNK do
  redis.call('ZREM', registry, unpack(gone, i, math.min(i + WRITE_CHUNK - 1, #gone)))
end
return made
