-- a glob spec read into the pieces the matcher (includes/glob.lua) walks. The spec, as
-- emq_notebook.triage.glob_spec writes it: 'G', then one item after another:
--   '*'                   any run of characters
--   '?'                   one character
--   'L' <n> ':' <n bytes> these bytes (a run of literal characters)
--   'C' <lo>-<hi>,... ';' one character whose code point lies in one of the ranges

-- a class's ranges tried for one item: each RANGES_A_STEP of them cost a step more
local RANGES_A_STEP = 4

-- a class 'C<lo>-<hi>,...;' starting at spec[i]: its ranges {lo, hi, ...} and the place after it
local function class_at(spec, i)
  local find, sub = string.find, string.sub
  local semi = find(spec, ';', i, true)
  if not semi then error('ERR a glob spec class ends with ;') end
  local class, at = {}, i + 1
  while at < semi do
    local dash = find(spec, '-', at, true)
    local comma = math.min(find(spec, ',', at, true) or semi, semi)
    class[#class + 1] = tonumber(sub(spec, at, dash - 1))
    class[#class + 1] = tonumber(sub(spec, dash + 1, comma - 1))
    at = comma + 1
  end
  return class, semi + 1
end

-- the pieces of a glob spec (split at its stars), each a list of items {lit = bytes} |
-- {any = count} (a run of `?`) | {lo, hi, lo, hi, ...} (a class), with `width` (its
-- bytes on ASCII text), `cost` (its steps), `anchor` (the index of its first literal
-- run), `before` (the characters before that run) and `wide` (it has a `?` or a
-- class); nil for '' (any text)
local function glob_of(spec)
  if spec == '' then return nil end
  local byte = string.byte
  if byte(spec, 1) ~= 71 then error('ERR a glob spec starts with G') end
  local pieces, piece, i = {}, {width = 0, cost = 0, before = 0}, 2
  local function add(item, width, cost)
    piece.width, piece.cost = piece.width + width, piece.cost + cost
    local last = piece[#piece]
    if item.any and last and last.any then
      last.any = last.any + 1
    else
      piece[#piece + 1] = item
    end
    if item.lit then
      piece.anchor = piece.anchor or #piece
    else
      piece.wide = true
      if not piece.anchor then piece.before = piece.before + 1 end
    end
  end
  while i <= #spec do
    local tag = byte(spec, i)
    if tag == 42 then
      pieces[#pieces + 1] = piece
      piece, i = {width = 0, cost = 0, before = 0}, i + 1
    elseif tag == 63 then
      add({any = 1}, 1, 1)
      i = i + 1
    elseif tag == 76 then
      local colon = string.find(spec, ':', i, true)
      local len = colon and tonumber(string.sub(spec, i + 1, colon - 1))
      if not len then error('ERR a glob spec literal is L<n>:<bytes>') end
      add({lit = string.sub(spec, colon + 1, colon + len)}, len, 1)
      i = colon + len + 1
    elseif tag == 67 then
      local class
      class, i = class_at(spec, i)
      add(class, 1, 1 + math.floor(#class / (2 * RANGES_A_STEP)))
    else
      error('ERR a glob spec item is *, ?, L or C')
    end
  end
  pieces[#pieces + 1] = piece
  return pieces
end
