-- @find -- one bounded step of a search of one set, on the server (extension).
--@readonly
-- KEYS[1] = the set (a state set or a lane's backlog), KEYS[2] = the queue base root
-- ARGV[1], ARGV[2] = the cursor: score and member of the last member examined ('' =
--   from the start); ARGV[3] = budget, members examined at most; ARGV[4] = bytes of
--   work at most (the fields the filters read, each glob item tried as STEP_BYTES, the
--   matches' fields sent; the step ends after the member that reaches it); ARGV[5] = limit, matches at most; ARGV[6],
--   ARGV[7] = the last_error and payload globs (specs as includes/glob.lua reads them;
--   '' = any); ARGV[8] = group ('' = any); ARGV[9] = least attempts, ARGV[10] = created
--   at or after, ARGV[11] = created before (epoch ms; '' = any)
-- returns {score, member, more, match...}: the next call's cursor (the last member
-- examined) and more = 1 while members follow it; each match is {id, score, group,
-- priority, attempts, failures, stalled, last_error, progress, payload}. A row that
-- lacks a field a filter reads does not match; a member with no row never does. A glob
-- is matched exactly but where the text or the glob holds a byte that is no part of a
-- well-formed UTF-8 character, or where a match would spend more than the step's work
-- left (includes/glob.lua): there the row may be sent though the glob does not match
-- it, for the caller to check again.
--@include reads
--@include cursor
--@include glob
local set, base = KEYS[1], KEYS[2]
local budget, bytes, limit = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local by_error, by_payload, group = glob_of(ARGV[6]), glob_of(ARGV[7]), ARGV[8]
local least, after, before = tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11])
-- the matcher's work for the text at hand, in items tried
local work = {steps = 0}

-- only the fields the filters read are fetched
local wanted, slot = {}, {}
for _, f in ipairs({{'group', group ~= ''}, {'attempts', least}, {'created_at', after or before},
                    {'last_error', by_error}, {'payload', by_payload}}) do
  if f[2] then
    wanted[#wanted + 1] = f[1]
    slot[f[1]] = #wanted
  end
end

-- the globs, each with the place of its field in a row
local globs = {}
if by_error then globs[#globs + 1] = {by_error, slot.last_error} end
if by_payload then globs[#globs + 1] = {by_payload, slot.payload} end

-- true when the row passes every filter; nil when a glob could not decide it with the
-- work left (the row is sent, and checked again by the caller)
local function matches(id, row, at)
  local any = false
  for k = 1, #wanted do any = any or row[at + k] ~= false end
  -- no field read at all: a member with no row is never a match
  if not any and redis.call('EXISTS', base .. 'job:' .. id) == 0 then return false end
  if group ~= '' and row[at + slot.group] ~= group then return false end
  if least then
    local n = whole_of(row[at + slot.attempts], 0)
    if not n or n < least then return false end
  end
  if after or before then
    local created = whole_of(row[at + slot.created_at])
    if not created or (after and created < after) or (before and created >= before) then return false end
  end
  local decided = true
  for g = 1, #globs do
    local text = row[at + globs[g][2]]
    if not text then return false end
    local said = glob_matches(text, globs[g][1], work)
    if said == false then return false end
    if said == nil then decided = nil end
  end
  return decided
end

local found = {}
local function search(id, row, at, left)
  -- the matcher may spend the bytes left (STEP_BYTES a step), and at least MIN_STEPS
  local steps = left > MIN_STEPS * STEP_BYTES and math.floor(left / STEP_BYTES) or MIN_STEPS
  work.steps = steps
  local said = matches(id, row, at)
  local spent = (steps - work.steps) * STEP_BYTES
  if said == false then return spent end
  local f = redis.call('HMGET', base .. 'job:' .. id, 'group', 'priority', 'attempts', 'failures', 'stalled',
    'last_error', 'progress', 'payload')
  for k = 1, 8 do
    if f[k] then spent = spent + #f[k] end
  end
  found[#found + 1] = {id, f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8]}
  if #found >= limit or said == nil then return false end
  return spent
end

local start = rank_after(set, ARGV[1], ARGV[2])
local examined, last = scan_step(set, base, start, budget, bytes, wanted, search)
if examined == 0 then return cursor_head(set, 0, start, ARGV[1], ARGV[2]) end
-- the scores of the matches and of the last member examined
local ids = {}
for k, m in ipairs(found) do ids[k] = m[1] end
ids[#ids + 1] = last
local scores = scores_of(set, ids)
local out = cursor_head(set, examined, start, ARGV[1], ARGV[2], last, scores[#ids])
for k, m in ipairs(found) do
  table.insert(m, 2, scores[k])
  out[#out + 1] = m
end
return out
