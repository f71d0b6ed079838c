-- a repeatable's definition (emq:{q}:repeat:defs, cjson), read the one way every
-- script that makes its jobs reads it.
--@include reads

-- the longest definition a script reads or writes (emq_notebook.repeat.DEF_BYTES, the
-- byte budget): a copy inside a script costs about 1.5 ms a MB and its cjson.decode as
-- much again, so a longer one (another node's) is never read: `register` writes none,
-- `tick` skips it with a `bad_row` event, `run_now` refuses it, a listing shows its size
local DEF_BYTES = 1048576

-- the due names one tick examines at most (emq_notebook.repeat.TICK_NAMES holds the
-- same number), whatever becomes of them: each costs an HSTRLEN, an HGET and a decode,
-- a bad one an event. Bounded by bytes read alone, a tick over 20,000 due definitions
-- that are not JSON held Valkey 142 ms, over 100,000 names with no definition 376 ms;
-- 500 names a call held it 4.3 ms (1,000: 10.8 ms), bench/repeat_tick.py
local TICK_NAMES = 500
-- the members one ZADD or ZREM of a tick names at most (well under the stack's unpack)
local WRITE_CHUNK = 500

-- the first registry key holding another type than its own (another node's, or one
-- written by hand): its name and the type it holds; nil when each is of its type or
-- absent. No script reads or writes a registry that answers it.
local function registry_misfit(base)
  for _, key in ipairs({{'repeat', 'zset'}, {'repeat:defs', 'hash'}}) do
    local held = redis.call('TYPE', base .. key[1])
    held = type(held) == 'table' and held.ok or held
    if held ~= key[2] and held ~= 'none' then return base .. key[1], held end
  end
  return nil
end

-- repeatable `name`'s definition: its text (nil when there is none) and its length in
-- bytes; a definition over DEF_BYTES is not read (nil and its length)
local function definition(base, name)
  local size = redis.call('HSTRLEN', base .. 'repeat:defs', name)
  if size > DEF_BYTES then return nil, size end
  return redis.call('HGET', base .. 'repeat:defs', name), size
end

-- A definition is decoded whole (cjson.decode) only when it is short: cjson builds a
-- Lua value for each JSON value it meets, about 100 ns each, so one definition of 1 MiB
-- of `{},{},...` another node wrote held Valkey 99 ms in a tick (and 500 of 1 KB of
-- small values 28 ms), where 1 MiB of payload text decodes in 2.5 ms. One over
-- SHAPED_FROM bytes is read first in the shape every writer gives a definition, an
-- object of plain fields around one payload string (`shaped`: only the payload string is
-- decoded); one of another shape is decoded whole when it is at most WHOLE_BYTES, and
-- otherwise not read (`shape`).
local SHAPED_FROM = 1024
local WHOLE_BYTES = 65536
-- what a whole decode counts against a call's byte budget, a byte of the definition:
-- its worst case (values of 3 bytes, `{},`) costs about 15 times a byte of payload text,
-- so one of WHOLE_BYTES takes a tick's DEF_BYTES
local DECODE_WORK = 16
-- the plain fields a shaped definition has at most before its payload and after it,
-- those after it within its last SHAPE_TAIL bytes (a group name is 128 characters at most)
local SHAPE_FIELDS = 8
local SHAPE_TAIL = 1024

-- the patterns of a plain field, anchored where a step reads: its name (a string with
-- no escape), then its value, a string with no escape or a bare word. The fields after
-- the payload are read in the definition's end reversed, where a value comes first and
-- a string with no escape reads the same
local PLAIN_NAME = '^"([^"\\]*)"%s*:%s*'
local PLAIN_STRING = '^"[^"\\]*"'
local BARE_WORD = '^[%w%.%+%-]+'
local REVERSED_NAME = '^%s*:%s*"([^"\\]*)"%s*(),%s*'

-- a plain value as cjson reads it: a string with no escape, true, false, null or a
-- JSON number; nil for any other text
local function plain(text)
  if string.byte(text, 1) == 34 then return string.sub(text, 2, -2) end
  if text == 'true' then return true end
  if text == 'false' then return false end
  if text == 'null' then return cjson.null end
  if string.find(text, '^%-?0%d') then return nil end
  if string.find(text, '^%-?%d+$') or string.find(text, '^%-?%d+%.%d+$')
    or string.find(text, '^%-?%d+%.?%d*[eE][%+%-]?%d+$') then
    return tonumber(text)
  end
  return nil
end

-- the plain value at `at` of `text` (`reversed`: of the definition's end reversed): its
-- value and where it ends, or nil
local function plain_at(text, at, reversed)
  local _, stop = string.find(text, PLAIN_STRING, at)
  if not stop then _, stop = string.find(text, BARE_WORD, at) end
  if not stop then return nil end
  local value = string.sub(text, at, stop)
  return plain(reversed and string.reverse(value) or value), stop
end

-- a definition of the shape every writer gives one (`{"every":...,"payload":"...",...}`,
-- its fields in any order, spaces between): a table as cjson.decode would answer it,
-- the payload string alone decoded; nil for one of another shape. The fields before
-- the payload are read from its start, those after it from its end (each step an
-- anchored pattern over a few hundred bytes at most), so the payload's escapes are never
-- walked in Lua; what lies between must decode as one string.
local function shaped(raw)
  local def = {}
  local _, at = string.find(raw, '^%s*{%s*')
  if not at then return nil end
  local open
  for _ = 0, SHAPE_FIELDS do
    local _, stop, name = string.find(raw, PLAIN_NAME, at + 1)
    if not stop then return nil end
    if name == 'payload' and string.byte(raw, stop + 1) == 34 then
      open = stop + 1
      break
    end
    local value, ends = plain_at(raw, stop + 1)
    if value == nil then return nil end
    def[name] = value
    local _, comma = string.find(raw, '^%s*,%s*', ends + 1)
    if not comma then
      -- the object ends with no payload string in it
      if string.find(raw, '^%s*}%s*$', ends + 1) then return def end
      return nil
    end
    at = comma
  end
  if not open then return nil end
  -- the end reversed: position k of `tail` is byte #raw - k + 1 of the definition
  local tail = string.reverse(string.sub(raw, math.max(open + 1, #raw - SHAPE_TAIL + 1)))
  local _, k = string.find(tail, '^%s*}%s*')
  if not k then return nil end
  local after = {}
  for _ = 0, SHAPE_FIELDS do
    local value, ends = plain_at(tail, k + 1, true)
    local name, comma
    if value ~= nil then _, ends, name, comma = string.find(tail, REVERSED_NAME, ends + 1) end
    -- no field there (or one that reaches back into the payload): the payload's end
    if not ends or #raw - comma + 1 <= open + 1 then
      local close = #raw - k
      if close <= open or string.byte(raw, close) ~= 34 then return nil end
      local ok, payload = pcall(cjson.decode, string.sub(raw, open, close))
      if not ok or type(payload) ~= 'string' then return nil end
      def.payload = payload
      -- cjson keeps the last of two fields of one name
      for field, v in pairs(after) do def[field] = v end
      return def
    end
    name = string.reverse(name)
    if after[name] == nil then after[name] = value end
    k = ends
  end
  return nil
end

-- the definition as a table, or nil and the field that is wrong (`definition`: not a
-- JSON object; `shape`: over WHOLE_BYTES and not `shaped`), and the bytes its reading
-- counts against a call's budget (a whole decode DECODE_WORK a byte). The one rule of a
-- readable definition: a tick, run-now and register read it so, and a listing
-- (`read_repeats`) answers its word. Reads only
local function readable(raw)
  local def = #raw > SHAPED_FROM and shaped(raw)
  local work = #raw
  if not def then
    if #raw > WHOLE_BYTES then return nil, 'shape', work end
    local ok
    ok, def = pcall(cjson.decode, raw)
    work = #raw * DECODE_WORK
    -- a JSON list decodes to a table too
    if not ok or type(def) ~= 'table' or def[1] ~= nil then return nil, 'definition', work end
  end
  if type(def.every) ~= 'number' or def.every < 1 or def.every > MAX_WHOLE
    or def.every ~= math.floor(def.every) then return nil, 'every', work end
  if type(def.payload) ~= 'string' then return nil, 'payload', work end
  if def.group ~= nil and type(def.group) ~= 'string' then return nil, 'group', work end
  local attempts = def.max_attempts or '1'
  if type(attempts) == 'number' then attempts = string.format('%.0f', attempts) end
  local n = type(attempts) == 'string' and whole_of(attempts)
  if not n or n < 1 then return nil, 'max_attempts', work end
  def.max_attempts = attempts
  return def, nil, work
end
