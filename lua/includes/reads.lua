-- the read-only fragments: whole numbers, a row's numeric fields, a lane's
-- counts, and the refusals they build. Nothing here writes or publishes, so a
-- `--@readonly` script (a dry run, a search) may include it; common and lanes
-- include it too, so every script reads a row the same way.

-- the largest whole number a Lua double and a Valkey integer both hold exactly
local MAX_WHOLE = 9007199254740991
-- the longest text that reads as one (a longer field is no whole number, whatever it holds)
local WHOLE_DIGITS = 17

-- a whole-number field as a row holds it: an optional minus, digits with no
-- leading zero, within MAX_WHOLE -- what HINCRBY, ZADD and tonumber all read the
-- same way. An absent field reads as `default`; anything else ('three', '',
-- '1e999', 'nan', ' 1') is nil: the caller refuses or skips, before any write.
local function whole_of(v, default)
  if not v then return default end
  if #v <= WHOLE_DIGITS and (v == '0' or string.find(v, '^%-?[1-9]%d*$')) then
    local n = tonumber(v)
    if n >= -MAX_WHOLE and n <= MAX_WHOLE then return n end
  end
  return nil
end

-- every whole-number field of a job row, with the value an absent one reads as
local ROW_WHOLES = {{'attempts', 0}, {'failures', 0}, {'stalled', 0}, {'max_attempts', 1},
  {'backoff', 1000}, {'priority', 0}}

-- the row's whole-number fields by name, or nil and the first field that holds
-- no whole number. Reads only.
local function row_wholes(jk)
  local names = {}
  for i, s in ipairs(ROW_WHOLES) do names[i] = s[1] end
  local vals = redis.call('HMGET', jk, unpack(names))
  local out = {}
  for i, s in ipairs(ROW_WHOLES) do
    local n = whole_of(vals[i], s[2])
    if n == nil then return nil, s[1] end
    out[s[1]] = n
  end
  return out
end

-- an id as a reply, a refusal or an event reports it: a long one's first 200 bytes
-- and its length, so a report never copies a megabyte id again (nor escapes 64 KB of
-- bytes that are not UTF-8 for an event: 6 ms). The head ends before a character's
-- continuation bytes (0x80-0xBF, three at most), so a UTF-8 id reads as whole
-- characters; an id of other bytes is cut at 200.
local function reported_id(id)
  if #id <= 256 then return id end
  local cut, byte = 200, string.byte
  while cut > 197 and byte(id, cut + 1) >= 128 and byte(id, cut + 1) < 192 do cut = cut - 1 end
  return string.sub(id, 1, cut) .. '... (' .. #id .. ' bytes)'
end

-- the refusal for a row (or a lane's meta) no transition can read: nothing written
local function bad_row(field, where)
  return redis.error_reply('EMQSTATE bad row ' .. field .. ' in ' .. reported_id(where))
end

-- a lane's backlog and its bookkeeping (lanes.lua describes them)
local function lane_pending(base, g) return base .. 'g:' .. g .. ':pending' end
local function lane_meta(base, g) return base .. 'g:' .. g .. ':meta' end

-- a lane's limit and active count and whether it is paused, as every script reads
-- them: each field measured before it is read and `paused` only asked whether it is
-- there, so a meta another node wrote long is never copied (300 lanes whose `paused`
-- held 1 MB held a claim 143 ms; a complete in a lane paused with 16 MB, 53 ms; a
-- promote, a reprocess into it the same). nil and the field when the meta holds no
-- whole number there (written by hand or another node; a longer field holds none,
-- whatever it holds), nil and 'type' when the meta is of another type than a hash
-- (WRONGTYPE stopped the script)
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
-- refusal (bad row 'type') for a key of another type there (another client's list,
-- string or set: a raw WRONGTYPE reached the operator), else nil and the row's field
-- count. One HLEN, O(1), in place of EXISTS: a hash is never empty.
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

-- an id another node wrote that names another job's subkey (`x:logs`, `x:lock`): its
-- row key would be job x's logs list or lock, so no script addresses it as a job; a
-- bulk verb leaves it where it is and reports it (emq_notebook.keyspace.check_server_id
-- holds the same rule). An id longer than MAX_ID bytes is foreign too: a script
-- hashes and copies an id at each key and member it names, so ONE id of 1 MB held
-- Valkey 23 ms in a call (4 MB: 95 ms). Any other id is addressed as it is.
local MAX_ID = 65536
local function foreign_id(id)
  if #id > MAX_ID then return true end
  -- the byte first: a bulk verb asks this of every member, and a byte costs less
  -- than the new string a tail would be
  if #id < 5 or string.byte(id, -5) ~= 58 then return false end
  local tail = string.sub(id, -4)
  return tail == 'logs' or tail == 'lock'
end

-- A job row's fields, none copied over a bound: any node's worker may write a field of
-- any size (a last_error, a progress), and a script holds the server about 1.5 ms a
-- megabyte it copies, more for larger ones. A row of at most MEASURED_FIELDS fields
-- is measured whole (MEMORY USAGE ... SAMPLES 0: every name and value counted,
-- O(its fields)) when at least MEASURED_FROM fields are asked; any other row (larger,
-- of more fields, a bound under MEASURED_BYTES, fewer fields asked, or a server or ACL
-- user without MEMORY USAGE, as the embedded fake) has each field asked measured
-- (HSTRLEN). The fields of a row together are held to what is left of the call's bytes
-- too (`measured_row`): 64 fields of 1 MiB-1 each, every one within the bound, copied in
-- one call held Valkey 107 to 121 ms.
local MEASURED_FIELDS = 64
-- a smaller bound than this passes no row measured whole (names, values and their
-- allocations): each field is measured instead
local MEASURED_BYTES = 4096
-- what a field may count for less in MEMORY USAGE than its length: a listpack keeps a
-- number of up to 20 digits in 9 bytes
local NUMBER_SLACK = 32
-- fewer fields asked are each measured: an HSTRLEN a field costs less than the HLEN
-- and the MEMORY USAGE of a row's measure
local MEASURED_FROM = 3

-- the bytes row `jk` (of `count` fields) holds at most, names and values all told, by one
-- MEMORY USAGE (no name copied) when that is at most `bytes`; nil over it, and on a
-- server or for an ACL user without MEMORY USAGE
local function row_within(jk, count, bytes)
  local size = redis.pcall('MEMORY', 'USAGE', jk, 'SAMPLES', '0')
  if type(size) ~= 'number' then return nil end
  size = size + NUMBER_SLACK * count
  if size > bytes then return nil end
  return size
end

-- the bytes row `jk` (of `count` fields) holds at most when no field of it can be over
-- `longest` (`row_within`); nil when it is not measured so
local function within_whole(jk, count, longest)
  if count > MEASURED_FIELDS or longest < MEASURED_BYTES then return nil end
  return row_within(jk, count, longest)
end

-- the fields of `fields` (one at least) over `longest` bytes in row `jk` (a field k that
-- `caps` names, over caps[k]: the longest value its reader can use), measured before any
-- is read: their places (1 to n) and their lengths by place; then the bytes the others
-- hold at most, and their lengths by place. A row measured whole (`within_whole`)
-- answers its figure, no lengths, unless that is over `left` (optional): then each
-- field is measured, so the bytes are exact. A field over its cap in a row measured
-- whole is read (the row holds at most `longest` bytes). nil for a key that is no hash
-- (and, when the row is measured whole, for no key)
local function over_fields(jk, fields, longest, left, caps)
  local n = #fields
  if n >= MEASURED_FROM then
    local count = redis.pcall('HLEN', jk)
    if type(count) ~= 'number' or count == 0 then return nil end
    local size = within_whole(jk, count, longest)
    if size and not (left and size > left) then return {}, {}, size end
  end
  local over, lengths, within, sizes = {}, {}, 0, {}
  for k = 1, n do
    local size = redis.pcall('HSTRLEN', jk, fields[k])
    if type(size) ~= 'number' then return nil end
    if size > (caps and caps[k] or longest) then
      over[#over + 1], lengths[k] = k, size
    else
      within, sizes[k] = within + size, size
    end
  end
  return over, lengths, within, sizes
end

-- a row measured field by field (`over_fields`) narrowed to `left` bytes: each field
-- within, in order, kept while it fits what is left, any other added to those over (its
-- length by place in `lengths`). Answers the places over, in order
local function fitted(n, lengths, sizes, left)
  local over = {}
  for k = 1, n do
    local size = sizes[k]
    if size and size <= left then
      left = left - size
    elseif size then
      lengths[k] = size
    end
    if lengths[k] then over[#over + 1] = k end
  end
  return over
end

-- fields `fields` of row `jk` measured by `over_fields`, those over the bound left out:
-- the values in their order, false where absent or not read
local function within_fields(jk, fields, over, lengths)
  if #over == 0 then return redis.call('HMGET', jk, unpack(fields)) end
  local within = {}
  for k = 1, #fields do
    if not lengths[k] then within[#within + 1] = fields[k] end
  end
  local got = #within > 0 and redis.call('HMGET', jk, unpack(within)) or {}
  local row, j = {}, 0
  for k = 1, #fields do
    if lengths[k] then
      row[k] = false
    else
      j = j + 1
      row[k] = got[j]
    end
  end
  return row
end

-- fields `fields` (one at least) of row `jk`, none over `longest` bytes copied and at
-- most `left` bytes in all (a row measured whole counts as its figure): the values in
-- their order (false where absent or not read), the places of those not read and their
-- lengths by place (`over_fields`). A row whose fields within `longest` hold more than
-- `left` is not read (false), or, when `partial`, narrowed to it (`fitted`: the fields
-- that fit read in order, the others answered as over; true last). nil for a key that
-- is no hash (and, when the row is measured whole, for no key)
local function measured_row(jk, fields, longest, left, partial)
  local over, lengths, within, sizes = over_fields(jk, fields, longest, left)
  if not over then return nil end
  local narrowed = within > left
  if narrowed then
    if not partial then return false end
    over = fitted(#fields, lengths, sizes, left)
  end
  return within_fields(jk, fields, over, lengths), over, lengths, narrowed
end

-- what a bulk move counts for a member's id against its byte budget: a move hashes,
-- copies and compares the id at each key and member it names (the row, the sets, the
-- event), so an id another node made 20 KB long costs ID_WORK times its length, not
-- its length once (at 1 byte a byte, one call of 20 KB ids held Valkey 41 ms)
local ID_WORK = 16
local function id_cost(id) return #id * ID_WORK end

-- what a move counts for a foreign id: its bytes once, as it reads them (it builds no
-- key of it and reports it clipped), so the jobs behind 10,000 foreign ids at a set's
-- head wait a sixteenth of the calls that many ids addressed would take
local function foreign_cost(id) return #id end

-- the members a bulk move reads of a set at once: it can count a member's id only once
-- it has read it, so a step reads a chunk at a time -- one member first, each next chunk
-- twice as many, up to MOVE_CHUNK, and never more than the bytes left cover at the
-- longest id yet -- and reads at most its byte budget plus one chunk (a step that read
-- its budget of members first copied 501 ids of 70 KB, 35 MB, out of the set to examine
-- one of them: 34 ms). A chunk can still meet long ids after short ones: 7 members of
-- 1 MB past the one that ends the step cost 13 ms (64 of them 123 ms), and 8 a chunk
-- costs a run of ordinary ids nothing measurable
local MOVE_CHUNK = 8

-- the members of `set` from rank `from` (0-based) to before rank `upto`, each handed in
-- set order to visit(id, score), which answers the bytes it read or wrote and true to
-- end the step after it; the step also ends once `bytes` are spent (after one member at
-- least). Nothing in `set` may change until it ends: it reads on by rank. Answers the
-- members examined, the last one's id and score, and the bytes spent.
local function each_member(set, from, upto, bytes, visit)
  local n, spent, longest, chunk, id, score = 0, 0, 0, 1, nil, nil
  while from + n < upto do
    local want = math.min(chunk, upto - from - n)
    if longest > 0 then want = math.min(want, math.max(1, math.floor((bytes - spent) / (longest * ID_WORK)))) end
    chunk = math.min(2 * chunk, MOVE_CHUNK)
    local page = redis.call('ZRANGE', set, from + n, from + n + want - 1, 'WITHSCORES')
    for k = 1, #page, 2 do
      id, score, n = page[k], page[k + 1], n + 1
      if #id > longest then longest = #id end
      local cost, stop = visit(id, score)
      spent = spent + cost
      if stop or spent >= bytes then return n, id, score, spent end
    end
    if #page < 2 * want then break end
  end
  return n, id, score, spent
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
-- and the row's key (for the caller's writes).
-- `seen` (optional) is the caller's table of the numbers it has read already, by text:
-- a bulk call reads the same few counters over and over, and a lookup costs a tenth of
-- whole_of.
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

-- the loop of the bulk verbs by id: ARGV[1] = work at most, ARGV[2] = bytes at most,
-- ARGV[3...] = the ids. visit(id) answers the id's word, the work it cost and the
-- bytes it read or freed; the loop stops once either budget is spent (after one id
-- at least, so every call makes progress). Answers the words of the ids examined, in
-- order: the caller sends the rest again.
local function each_id(argv, visit)
  local budget, bytes = tonumber(argv[1]), tonumber(argv[2])
  local out, work, spent = {}, 0, 0
  for i = 3, #argv do
    if work >= budget or spent >= bytes then break end
    local word, w, b = visit(argv[i])
    out[#out + 1] = word
    work, spent = work + w, spent + b
  end
  return out
end
