-- a job row and a lane's meta as every script reads them, and the refusals they
-- build: a row no transition can read refuses with nothing written. Reads only.
--@include numbers
--@include ids

-- the refusal for a row (or a lane's meta) no transition can read: nothing written
local function bad_row(field, where)
  return redis.error_reply('EMQSTATE bad row ' .. field .. ' in ' .. reported_id(where))
end

-- a lane's backlog and its bookkeeping (lanes.lua describes them)
local function lane_pending(base, g) return base .. 'g:' .. g .. ':pending' end
local function lane_meta(base, g) return base .. 'g:' .. g .. ':meta' end

-- a lane's limit and active count and whether it is paused: each field measured before
-- it is read and `paused` only asked whether it is there, so a meta another node wrote
-- long is never copied. nil and the field when the meta holds no whole number there (a
-- longer field holds none, whatever it holds), nil and 'type' when the meta is no hash
local function measured_lane_counts(base, g)
  local mk = lane_meta(base, g)
  local size = redis.pcall('HSTRLEN', mk, 'limit')
  if type(size) ~= 'number' then return nil, 'type' end
  if size > WHOLE_DIGITS then return nil, 'limit' end
  if redis.call('HSTRLEN', mk, 'active') > WHOLE_DIGITS then return nil, 'active' end
  local m = redis.call('HMGET', mk, 'limit', 'active')
  local limit, active = whole_of(m[1], 1), whole_of(m[2], 0)
  if limit == nil then return nil, 'limit' end
  if active == nil then return nil, 'active' end
  return limit, active, redis.call('HEXISTS', mk, 'paused') == 1
end

-- nil when the lane's meta is readable, else the refusal naming the bad field
local function lane_refusal(base, g)
  local ok, field = measured_lane_counts(base, g)
  if ok == nil then return bad_row(field, 'lane ' .. g) end
  return nil
end

-- what stops a per-job verb reading row `jk` (of job `id`) at all: -1 for no row, the
-- refusal (bad row 'type') for a key of another type there, else nil and the row's
-- field count. One HLEN, O(1): a hash is never empty.
local function row_refusal(jk, id)
  local n = redis.pcall('HLEN', jk)
  if type(n) ~= 'number' then return bad_row('type', id) end
  if n == 0 then return -1 end
  return nil, n
end

-- field `name` of row `jk` (of job `id`), false when absent; nil and the refusal (bad
-- row 'type') when the key is of another type than a hash
local function row_field(jk, name, id)
  local v = redis.pcall('HGET', jk, name)
  if type(v) == 'table' then return nil, bad_row('type', id) end
  return v
end

-- nil when the job's `:logs` key is a list or none, else the refusal (bad row 'type'
-- in logs <id>): another client's string there
local function logs_refusal(logs, id)
  local n = redis.pcall('LLEN', logs)
  if type(n) ~= 'number' then return bad_row('type', 'logs ' .. id) end
  return nil
end

-- what a bulk verb reads of a member's row, in ONE HMGET: its group, then every
-- whole-number field (the priority's place noted for the moves that need it)
local MEMBER_FIELDS, MEMBER_DEFAULTS, PRIORITY_AT = {'group'}, {false}, 0
for i = 1, #ROW_WHOLES do
  MEMBER_FIELDS[i + 1], MEMBER_DEFAULTS[i + 1] = ROW_WHOLES[i][1], ROW_WHOLES[i][2]
  if ROW_WHOLES[i][1] == 'priority' then PRIORITY_AT = i + 1 end
end

-- a set member's row as a bulk verb reads it: one HMGET (EXISTS only for a hash that
-- holds none of those fields). Answers -1 for no row (a ghost); the refusal naming the
-- first field no transition can read, or its lane's meta (`type` when the key is not a
-- hash); else nil, the group (false when flat) and the priority. Last, the bytes read
-- and the row's key. `seen` (optional): the caller's table of the numbers it has read
-- already, by text (a bulk call reads the same few counters over and over).
local function read_member(base, id, seen)
  local jk = base .. 'job:' .. id
  local vals = redis.pcall('HMGET', jk, unpack(MEMBER_FIELDS))
  if vals.err then return bad_row('type', id), false, 0, 0, jk end
  local g = vals[1]
  local bytes, any, priority = g and #g or 0, g and true or false, 0
  seen = seen or {}
  for i = 2, #MEMBER_FIELDS do
    local v = vals[i]
    local n = MEMBER_DEFAULTS[i]
    if v then
      any, bytes, n = true, bytes + #v, seen[v]
      if n == nil then
        n = whole_of(v) or false
        seen[v] = n
      end
      if n == false then return bad_row(MEMBER_FIELDS[i], id), false, 0, bytes, jk end
    end
    if i == PRIORITY_AT then priority = n end
  end
  if not any and redis.call('EXISTS', jk) == 0 then return -1, false, 0, 0, jk end
  if g then
    local refused = lane_refusal(base, g)
    if refused then return refused, g, 0, bytes, jk end
  end
  return nil, g, priority, bytes, jk
end

-- the bytes a delete of row `jk` frees on the script's thread: its payload, the one
-- field that is large by design (0 for a key that is not a hash)
local function payload_bytes(jk)
  local n = redis.pcall('HSTRLEN', jk, 'payload')
  return type(n) == 'number' and n or 0
end
