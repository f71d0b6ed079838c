-- whole numbers as a row holds them, and a row's whole-number fields. Reads only.
--@include constants

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

-- the row's whole-number fields (ROW_WHOLES) by name, or nil and the first field that
-- holds no whole number. Reads only.
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
