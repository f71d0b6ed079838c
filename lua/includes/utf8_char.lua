-- a character of a text as Python reads it from the bytes: UTF-8, each byte outside a
-- well-formed sequence a character of its own (U+DC00 + the byte, surrogateescape)

-- the code point of the character at text[p] and its length in bytes
local function char_at(text, p)
  local byte = string.byte
  local b = byte(text, p)
  if b < 128 then return b, 1 end
  local len, cp, lo, hi = 0, 0, 128, 191
  if b >= 194 and b <= 223 then
    len, cp = 2, b - 192
  elseif b >= 224 and b <= 239 then
    len, cp = 3, b - 224
    if b == 224 then lo = 160 elseif b == 237 then hi = 159 end
  elseif b >= 240 and b <= 244 then
    len, cp = 4, b - 240
    if b == 240 then lo = 144 elseif b == 244 then hi = 143 end
  else
    return 56320 + b, 1
  end
  for j = 1, len - 1 do
    local c = byte(text, p + j)
    if not c or c < lo or c > hi then return 56320 + b, 1 end
    cp, lo, hi = cp * 64 + c - 128, 128, 191
  end
  return cp, len
end

-- the place of the character after the one at text[p] (p itself at the end)
local function next_char(text, p)
  local b = string.byte(text, p)
  if not b or b < 194 then return p + 1 end
  local _, len = char_at(text, p)
  return p + len
end

-- p, or the place of the next character when p falls inside one: no character starts
-- at a continuation byte of a well-formed sequence begun up to 3 bytes before
local function char_start(text, p)
  local b = string.byte(text, p)
  if not b or b < 128 or b > 191 then return p end
  for q = p - 1, math.max(p - 3, 1), -1 do
    local lead = string.byte(text, q)
    if lead < 128 then return p end
    if lead >= 194 then return math.max(q + select(2, char_at(text, q)), p) end
  end
  return p
end
