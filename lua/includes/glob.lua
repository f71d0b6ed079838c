-- A glob (fnmatch: `*`, `?`, `[...]`) matched against a whole field, with no
-- backtracking past the last `*` and no pattern built from the glob. The spec, as
-- emq_notebook.triage.glob_spec writes it: 'G', then one item after another:
--   '*'                  any run of characters
--   '?'                  one character
--   'L' <n> ':' <n bytes> these bytes (a run of literal characters)
--   'C' <lo>-<hi>,... ';' one character whose code point lies in one of the ranges
-- A character is what Python reads from the bytes (UTF-8, each byte outside a
-- well-formed sequence a character of its own, U+DC00 + the byte): `?` and a class read
-- one, and a `*` gives up one at a time. A literal run is compared byte for byte, so a
-- glob naming such a byte as a literal may match inside a character, where Python's
-- fnmatch would not (never the reverse): the caller checks each match again.
--
-- The stars split the glob into pieces; each piece has a fixed number of items. The
-- first is matched at the start, each middle one at its leftmost place after the one
-- before (the leftmost end is never later than any other, so no other place need be
-- tried), the last so that it ends the text: on a mismatch only the last star gives
-- up more. A piece's place is found by a plain find of its first literal run, else by
-- trying each character's start. So a text costs at most its bytes x the glob's items,
-- and the work a call may spend matching is `work.steps`: a match that would spend more
-- answers nil (undecided), and the caller lets the row through to the check that
-- follows. Nothing recurses. Reads only.

-- an item tried, as bytes of a step's work (0.3 to 1.1 us on the bench machine, a class
-- read on non-ASCII text the dearest: so a step's byte budget of matching, 1 MB, is
-- at most about 8 ms), and the fewest a text is given before it is left undecided
local STEP_BYTES, MIN_STEPS = 128, 2048
-- a class's ranges tried for one item: each RANGES_A_STEP of them cost a step more
local RANGES_A_STEP = 4

-- the pieces of a glob spec, each a list of items {lit = bytes} | {any = count} |
-- {lo, hi, lo, hi, ...} (a class), with `width` (its bytes on ASCII text), `before`
-- (the items before its first literal run, `anchor` that run's index) and `wide` (it
-- has a `?` or a class); nil for '' (any text)
local function glob_of(spec)
  if spec == '' then return nil end
  local find, sub, byte = string.find, string.sub, string.byte
  if byte(spec, 1) ~= 71 then error('ERR a glob spec starts with G') end
  local pieces, piece, i, n = {}, {width = 0, cost = 0}, 2, #spec
  local function add(item, width)
    piece[#piece + 1] = item
    local cost = 1
    if not item.lit and not item.any then cost = 1 + math.floor(#item / (2 * RANGES_A_STEP)) end
    piece.width, piece.cost = piece.width + width, piece.cost + cost
    if item.lit then
      piece.anchor = piece.anchor or #piece
    else
      piece.wide = true
      if not piece.anchor then piece.before = (piece.before or 0) + (item.any or 1) end
    end
  end
  while i <= n do
    local tag = byte(spec, i)
    if tag == 42 then
      pieces[#pieces + 1] = piece
      piece, i = {width = 0, cost = 0}, i + 1
    elseif tag == 63 then
      local last = piece[#piece]
      if last and last.any then
        -- a run of `?` is one item that steps over that many characters
        last.any, piece.width, piece.cost = last.any + 1, piece.width + 1, piece.cost + 1
        if not piece.anchor then piece.before = piece.before + 1 end
      else
        add({any = 1}, 1)
      end
      i = i + 1
    elseif tag == 76 then
      local colon = find(spec, ':', i, true)
      local len = colon and tonumber(sub(spec, i + 1, colon - 1))
      if not len then error('ERR a glob spec literal is L<n>:<bytes>') end
      add({lit = sub(spec, colon + 1, colon + len)}, len)
      i = colon + len + 1
    elseif tag == 67 then
      local semi = find(spec, ';', i, true)
      if not semi then error('ERR a glob spec class ends with ;') end
      local class, at = {}, i + 1
      while at < semi do
        local dash = find(spec, '-', at, true)
        local comma = find(spec, ',', at, true) or semi
        if comma > semi then comma = semi end
        class[#class + 1] = tonumber(sub(spec, at, dash - 1))
        class[#class + 1] = tonumber(sub(spec, dash + 1, comma - 1))
        at = comma + 1
      end
      add(class, 1)
      i = semi + 1
    else
      error('ERR a glob spec item is *, ?, L or C')
    end
  end
  pieces[#pieces + 1] = piece
  for _, p in ipairs(pieces) do p.before = p.before or 0 end
  return pieces
end

-- the code point of the character at text[p] and its length in bytes, as Python's
-- UTF-8 decoder (with surrogateescape) reads it
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

-- the end (the byte after it) of `piece` matched at text[p], or nil
local function piece_at(text, n, piece, p, work)
  local sub = string.sub
  work.steps = work.steps - piece.cost
  for k = 1, #piece do
    local item = piece[k]
    local lit = item.lit
    if lit then
      if sub(text, p, p + #lit - 1) ~= lit then return nil end
      p = p + #lit
    elseif item.any then
      for _ = 1, item.any do
        if p > n then return nil end
        local _, len = char_at(text, p)
        p = p + len
      end
    else
      if p > n then return nil end
      local cp, len = char_at(text, p)
      local inside = false
      for r = 1, #item, 2 do
        if cp >= item[r] and cp <= item[r + 1] then
          inside = true
          break
        end
      end
      if not inside then return nil end
      p = p + len
    end
  end
  return p
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
  local byte = string.byte
  local b = byte(text, p)
  if not b or b < 128 or b > 191 then return p end
  for q = p - 1, p - 3, -1 do
    local lead = byte(text, q)
    if not lead or lead < 128 then return p end
    if lead >= 194 then
      local _, len = char_at(text, q)
      return q + len > p and q + len or p
    end
  end
  return p
end

-- the leftmost place at or after s (a character's start) where `piece` matches: its
-- start and end, or nil (work.steps <= 0 when the work ran out first). The places tried
-- are the starts of characters, so a piece matches whole characters.
local function leftmost(text, n, piece, s, work)
  local anchor, f = piece.anchor, nil
  while s <= n + 1 and work.steps > 0 do
    if anchor and (not f or f < s + piece.before) then
      -- no match starts before the first place its first literal run can be
      local from = s + piece.before
      f = string.find(text, piece[anchor].lit, from, true)
      work.steps = work.steps - 1 - ((f or n) - from) / 64
      if not f then return nil end
      if f - 4 * piece.before > s then s = char_start(text, f - 4 * piece.before) end
    end
    local e = piece_at(text, n, piece, s, work)
    if e then return s, e end
    s = next_char(text, s)
  end
end

-- true when `text` matches the glob `pieces`, false when not, nil when the work ran out
local function glob_matches(text, pieces, work)
  local n, last = #text, #pieces
  -- a glob that opens with a literal run: one plain find settles most texts
  local first = pieces[1][1]
  if first and first.lit and string.find(text, first.lit, 1, true) ~= 1 then
    work.steps = work.steps - 1 - n / 64
    return false
  end
  local e = piece_at(text, n, pieces[1], 1, work)
  if not e then return false end
  if last == 1 then return e == n + 1 end
  for k = 2, last - 1 do
    local at
    at, e = leftmost(text, n, pieces[k], e, work)
    if not at then
      if work.steps <= 0 then return nil end
      return false
    end
  end
  local tail = pieces[last]
  if #tail == 0 then return true end
  -- the last piece ends the text: where, on bytes all ASCII, its width says
  local s = n + 1 - tail.width
  if tail.wide then work.steps = work.steps - (n - e) / 16 end
  if not tail.wide or not string.find(text, '[\128-\255]', e) then
    return s >= e and piece_at(text, n, tail, s, work) == n + 1
  end
  while work.steps > 0 do
    local at, stop = leftmost(text, n, tail, e, work)
    if not at then break end
    if stop == n + 1 then return true end
    e = next_char(text, at)
  end
  if work.steps <= 0 then return nil end
  return false
end
