-- a definition read in the shape every writer gives one: an object of plain fields
-- around one payload string, only the payload decoded (includes/repeat_def.lua reads a
-- long definition so: cjson builds a Lua value for each JSON value, so a whole decode
-- of a long one of many small values costs far more than its bytes)

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

-- `raw` (`{"every":...,"payload":"...",...}`, its fields in any order, spaces between)
-- as cjson.decode would answer it, the payload string alone decoded; nil for another
-- shape. The fields before the payload are read from its start, those after it from its
-- end (each step an anchored pattern over a few hundred bytes at most), so the
-- payload's escapes are never walked in Lua; what lies between must decode as one string.
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
