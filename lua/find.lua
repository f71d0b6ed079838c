-- @find -- one bounded step of a search of one set, on the server (extension).
--@readonly
-- KEYS[1] = the set (a state set or a lane's backlog), KEYS[2] = the queue base root
-- ARGV[1], ARGV[2] = the cursor: score and member of the last member examined ('' =
--   from the start); ARGV[3] = budget, members examined at most; ARGV[4] = bytes of
--   work at most (each member's id, the fields the filters read, each glob item tried
--   as STEP_BYTES, the matches' fields sent; the step ends after the member that
--   reaches it, or before one whose id and fields would pass it, unless that is the
--   step's first); ARGV[5] = limit, matches at most; ARGV[6], ARGV[7] = the last_error
--   and payload globs (includes/glob.lua; '' = any); ARGV[8] = group ('' = any);
--   ARGV[9] = least attempts, ARGV[10] = created at or after, ARGV[11] = created before
--   (epoch ms; '' = any); ARGV[12] = '1': only the rows whose last_error is over ARGV[4]
--   bytes (measured, never read; '' = any)
-- returns {score, member, more, match...}: the next call's cursor and more = 1 while
-- members follow it; each match is {id, score, group, priority, attempts, failures,
-- stalled, last_error, progress, payload}, then the place (1 to 8) of each field not
-- read here (over ARGV[4] bytes, or past the step's bytes left), its value nil, for the
-- caller to read by name (emq_notebook.jobs.whole_field); the step ends after it.
-- Every row is measured before it is read (measured.lua, cursor.lua): a field over
-- ARGV[4] bytes is never copied and matches no filter; a member with no row, a foreign
-- id or a key that is no hash never matches. A glob the step cannot decide (bytes that
-- are no UTF-8, work past the step's, a payload over ARGV[4]) sends the row for the
-- caller to check again.
--@include reads
--@include cursor
--@include glob
local set, base = KEYS[1], KEYS[2]
local budget, bytes, limit = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local by_error, by_payload, group = glob_of(ARGV[6]), glob_of(ARGV[7]), ARGV[8]
local least, after, before = tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11])
local long_error = ARGV[12] == '1'
-- the matcher's work for the text at hand, in items tried
local work = {steps = 0}

-- only the fields the filters read are fetched, the payload apart (its size first), each
-- no longer than a value that could pass its filter: the group asked, a whole number; a
-- last_error a long_error search reads is measured, never read (its length)
local wanted, slot, caps = {}, {}, {}
for _, f in ipairs({{'group', group ~= '', #group}, {'attempts', least, WHOLE_DIGITS},
                    {'created_at', after or before, WHOLE_DIGITS},
                    {'last_error', by_error or long_error, long_error and 0 or nil}}) do
  if f[2] then
    wanted[#wanted + 1] = f[1]
    slot[f[1]], caps[#wanted] = #wanted, f[3]
  end
end
-- the place of the field a filter reads by its length (a number there is no refusal)
local measured_at = long_error and slot.last_error

-- the fields a match sends (emq_notebook.frames.FIELDS)
local SENT = {'group', 'priority', 'attempts', 'failures', 'stalled', 'last_error', 'progress', 'payload'}
-- the bytes a match's fields may take past the step's bytes left: an ordinary row's, so
-- one is sent whole at a step's end
local SENT_BYTES = 4096

-- the payload of row jk when it is at most `bytes` long: the text (false when the row
-- has none), or nil and its size when it is longer; false and 0 for a key that is no hash
local function payload_of(jk)
  local size = redis.pcall('HSTRLEN', jk, 'payload')
  if type(size) ~= 'number' then return false, 0 end
  if size > bytes then return nil, size end
  return redis.call('HGET', jk, 'payload'), size
end

-- true when the row passes every filter; nil when a glob could not decide it with the
-- work left, or the payload a payload glob reads is too large to read here (the row is
-- sent, and checked again by the caller). Also the bytes of the payload it read
local function matches(id, row, at)
  if foreign_id(id) then return false, 0 end
  local jk = base .. 'job:' .. id
  local any = false
  for k = 1, #wanted do
    local v = row[at + k]
    -- a field over `bytes` or its cap (its length: not read) matches no filter
    if type(v) == 'number' and k ~= measured_at then return false, 0 end
    any = any or v ~= false
  end
  -- no field read at all: a member with no row (or a key that is no row) never matches
  if not any and redis.call('TYPE', jk).ok ~= 'hash' then return false, 0 end
  if group ~= '' and row[at + slot.group] ~= group then return false, 0 end
  if least then
    local n = whole_of(row[at + slot.attempts], 0)
    if not n or n < least then return false, 0 end
  end
  if after or before then
    local created = whole_of(row[at + slot.created_at])
    if not created or (after and created < after) or (before and created >= before) then return false, 0 end
  end
  if long_error then
    local size = row[at + slot.last_error]
    if type(size) ~= 'number' or size <= bytes then return false, 0 end
  end
  local decided = true
  if by_error then
    local text = row[at + slot.last_error]
    if type(text) ~= 'string' then return false, 0 end
    local said = glob_matches(text, by_error, work)
    if said == false then return false, 0 end
    if said == nil then decided = nil end
  end
  if not by_payload then return decided, 0 end
  local text, size = payload_of(jk)
  if text == false then return false, 0 end
  if text == nil then return nil, 0 end
  local said = glob_matches(text, by_payload, work)
  if said == false then return false, size end
  if said == nil then decided = nil end
  return decided, size
end

local found = {}
local function search(id, row, at, left)
  -- the matcher may spend the bytes left (STEP_BYTES a step), and at least MIN_STEPS
  local steps = left > MIN_STEPS * STEP_BYTES and math.floor(left / STEP_BYTES) or MIN_STEPS
  work.steps = steps
  local said, read = matches(id, row, at)
  local spent = (steps - work.steps) * STEP_BYTES + read
  if said == false then return spent end
  -- a match's fields, each measured first: one over `bytes`, or past the bytes left (at
  -- least SENT_BYTES), is answered by its place, and the step ends after it
  local free = math.max(left - spent, SENT_BYTES)
  local f, over, _, narrowed = measured_row(base .. 'job:' .. id, SENT, bytes, free, true)
  if not f then return spent end
  for i, k in ipairs(over) do f[8 + i] = k end
  for k = 1, 8 do
    if f[k] then spent = spent + #f[k] end
  end
  table.insert(f, 1, id)
  found[#found + 1] = f
  if #found >= limit or said == nil or narrowed then return false end
  return spent
end

local start = rank_after(set, ARGV[1], ARGV[2])
local examined, last = scan_step(set, base, start, budget, bytes, wanted, search, caps)
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
