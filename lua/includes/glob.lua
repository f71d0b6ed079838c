-- a glob (fnmatch: `*`, `?`, `[...]`) matched against a whole text, linear in it: no
-- backtracking past the last `*`, no pattern built from the glob, nothing recursive.
-- `?` and a class read one character (includes/utf8_char.lua); a literal run is compared
-- byte for byte, so a glob naming a byte outside a well-formed character may match inside
-- one, where Python's fnmatch would not (never the reverse): the caller checks each match.
-- The first piece is matched at the start, each middle one at its leftmost place after
-- the one before (no later end is ever better), the last so that it ends the text; a
-- piece's place is found by a plain find of its first literal run, else by trying each
-- character's start. A text costs at most its bytes x the glob's items, spent from
-- `work.steps`: a match that would spend more answers nil (undecided). Reads only.
--@include utf8_char
--@include glob_spec

-- an item tried, as bytes of a step's work, and the fewest steps a text is given
local STEP_BYTES, MIN_STEPS = 128, 2048

-- the end (the byte after it) of `piece` matched at text[p], or nil
local function piece_at(text, n, piece, p, work)
  work.steps = work.steps - piece.cost
  for k = 1, #piece do
    local item = piece[k]
    local lit = item.lit
    if lit then
      if string.sub(text, p, p + #lit - 1) ~= lit then return nil end
      p = p + #lit
    elseif item.any then
      for _ = 1, item.any do
        if p > n then return nil end
        p = next_char(text, p)
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

-- the leftmost character start at or after s where `piece` matches: its start and end,
-- or nil (work.steps <= 0 when the work ran out first)
local function leftmost(text, n, piece, s, work)
  local f -- where the piece's first literal run was found last
  while s <= n + 1 and work.steps > 0 do
    if piece.anchor and (not f or f < s + piece.before) then
      -- no match starts before the first place its first literal run can be
      local from = s + piece.before
      f = string.find(text, piece[piece.anchor].lit, from, true)
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
  -- on ASCII bytes the last piece's width says where it starts
  if tail.wide then work.steps = work.steps - (n - e) / 16 end
  if not tail.wide or not string.find(text, '[\128-\255]', e) then
    local s = n + 1 - tail.width
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
