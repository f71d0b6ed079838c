-- @find -- one bounded step of a search of one set, on the server (extension).
--@readonly
-- KEYS[1] = the set (a state set or a lane's backlog), KEYS[2] = the queue base root
-- ARGV[1], ARGV[2] = the cursor: score and member of the last member examined ('' =
--   from the start); ARGV[3] = budget, members examined at most; ARGV[4] = limit,
--   matches at most; ARGV[5], ARGV[6] = the last_error and payload globs (specs as
--   includes/glob.lua reads them; '' = any); ARGV[7] = group ('' = any); ARGV[8] =
--   least attempts, ARGV[9] = created at or after, ARGV[10] = created before (epoch
--   ms; '' = any)
-- returns {score, member, more, match...}: the next call's cursor (the last member
-- examined) and more = 1 while members follow it; each match is {id, score, group,
-- priority, attempts, failures, stalled, last_error, progress, payload}. A row that
-- lacks a field a filter reads does not match; a member with no row never does.
--@include reads
--@include cursor
--@include glob
local set, base = KEYS[1], KEYS[2]
local budget, limit = tonumber(ARGV[3]), tonumber(ARGV[4])
local by_error, by_payload, group = glob_of(ARGV[5]), glob_of(ARGV[6]), ARGV[7]
local least, after, before = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])

-- only the fields the filters read are fetched
local wanted, slot = {}, {}
for _, f in ipairs({{'last_error', by_error}, {'payload', by_payload}, {'group', group ~= ''},
                    {'attempts', least}, {'created_at', after or before}}) do
  if f[2] then
    wanted[#wanted + 1] = f[1]
    slot[f[1]] = #wanted
  end
end

local start = rank_after(set, ARGV[1], ARGV[2])
local batch = redis.call('ZRANGE', set, start, start + budget - 1, 'WITHSCORES')
-- the wanted fields of the whole batch, in one read as @errors reads its texts:
-- #wanted values a row, in the batch's order (false where a row or field is
-- missing); nil when the ACL refuses reading keys by a pattern, and then each row's
-- are read with an HGET or HMGET
-- SORT turns a small set's listpack into a skiplist (the set's bytes change), so only a
-- set that is a skiplist already is read by a pattern; a server with no encodings to
-- keep (no OBJECT command: fakeredis) reads any set so
local encoding = redis.pcall('OBJECT', 'ENCODING', set)
local by_pattern = encoding == 'skiplist' or (type(encoding) == 'table' and encoding.err ~= nil)
local fields
if #wanted > 0 and by_pattern then
  local sort = {set, 'BY', 'nosort', 'LIMIT', start, budget}
  for _, f in ipairs(wanted) do
    sort[#sort + 1] = 'GET'
    sort[#sort + 1] = base .. 'job:*->' .. f
  end
  fields = redis.pcall('SORT_RO', unpack(sort))
  if fields.err then fields = nil end
end

-- the k-th member of the batch, its row at `jk`
local function matches(jk, k)
  if #wanted == 0 then return redis.call('EXISTS', jk) == 1 end
  local row, at = fields, (k - 1) * #wanted
  if not row then
    -- one field (the usual search): HGET, a little cheaper than HMGET per row
    row, at = #wanted == 1 and {redis.call('HGET', jk, wanted[1])} or redis.call('HMGET', jk, unpack(wanted)), 0
  end
  if by_error then
    local text = row[at + slot.last_error]
    if not (text and glob_matches(text, by_error)) then return false end
  end
  if by_payload then
    local text = row[at + slot.payload]
    if not (text and glob_matches(text, by_payload)) then return false end
  end
  if group ~= '' and row[at + slot.group] ~= group then return false end
  if least then
    local n = whole_of(row[at + slot.attempts], 0)
    if not n or n < least then return false end
  end
  if after or before then
    local created = whole_of(row[at + slot.created_at])
    if not created or (after and created < after) or (before and created >= before) then return false end
  end
  return true
end

local found, examined = {}, 0
for i = 1, #batch, 2 do
  examined = examined + 1
  local jk = base .. 'job:' .. batch[i]
  if matches(jk, examined) then
    local f = redis.call('HMGET', jk, 'group', 'priority', 'attempts', 'failures', 'stalled',
      'last_error', 'progress', 'payload')
    found[#found + 1] = {batch[i], batch[i + 1], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8]}
    if #found >= limit then break end
  end
end
local out = cursor_head(set, batch, examined, start, ARGV[1], ARGV[2])
for _, m in ipairs(found) do out[#out + 1] = m end
return out
