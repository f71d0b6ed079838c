-- a glob (fnmatch: `*`, `?`, `[...]`) matched against a whole field, as
-- emq_notebook.triage translates it. The spec is fields split at NUL bytes (no
-- translated pattern holds a raw NUL: `%z` stands for one): the whole glob as one
-- anchored Lua pattern; and, when the glob has a `*`, the piece before the first
-- `*`, the piece after the last, that piece's length in characters, '1' when every
-- item is an ASCII literal ('' otherwise), then the pieces between. Reads only.

local function glob_of(spec)
  if spec == '' then return nil end
  local f, pos = {}, 1
  while true do
    local z = string.find(spec, '\0', pos, true)
    if not z then
      f[#f + 1] = string.sub(spec, pos)
      break
    end
    f[#f + 1] = string.sub(spec, pos, z - 1)
    pos = z + 1
  end
  local g = {whole = f[1], star = #f > 1, middle = {}}
  if g.star then
    -- the first and last pieces anchored once here, not for every row
    g.prefix = f[2] ~= '' and '^' .. f[2] or nil
    g.suffix = f[3] ~= '' and '^' .. f[3] .. '$' or nil
    g.suffix_len = tonumber(f[4])
    -- ASCII literals only: the pieces are exact byte for byte on any text
    g.exact = f[5] == '1'
    for i = 6, #f do g.middle[#g.middle + 1] = f[i] end
  end
  return g
end

-- the pieces between stars, each at its leftmost place, as fnmatch takes them: exact
-- on ASCII text (a character is a byte), with no backtracking over the stars
local function pieces_match(text, g)
  local pos = 1
  if g.prefix then
    local _, e = string.find(text, g.prefix)
    if not e then return false end
    pos = e + 1
  end
  for _, piece in ipairs(g.middle) do
    local _, e = string.find(text, piece, pos)
    if not e then return false end
    pos = e + 1
  end
  local from = #text - g.suffix_len + 1
  if from < pos then return false end
  return not g.suffix or string.find(text, g.suffix, from) ~= nil
end

local function glob_matches(text, g)
  if not g.star then return string.find(text, g.whole) ~= nil end
  if pieces_match(text, g) then return true end
  if g.exact then return false end
  -- a text with bytes past ASCII, a glob with `?` or a class or a wide literal: the
  -- whole pattern (Lua backtracks fully), so no match is missed; what it lets
  -- through too is checked again by the caller
  return string.find(text, '[\128-\255]') ~= nil and string.find(text, g.whole) ~= nil
end
