-- The key of an error text: emq_notebook.triage._replaced's replacements in one pass
-- (tests/test_triage.py holds the two together), in its order: 1. each quoted part ->
-- <str> (a quote opens a part when a quote of its kind follows it); 2. each UUID and
-- each run of 8 or more hex digits holding a digit, no hex digit either side -> <hex>;
-- 3. each remaining number (digits, an optional dot and digits) -> <num>. 2 and 3 happen
-- inside a *stretch*: hex digits, dots and dashes from a digit or dash (and the hex
-- letters just before it); the plain text between stays as it is.
--
-- Bounded: the key's pieces are put one by one; once it holds more than `length`
-- printable ASCII characters no later byte can change the signature's first `length`,
-- so reading stops there. No pattern is built from a text. Definitions only.

-- bytes: DIGIT 0-9; HEX 0-9a-fA-F; LETTER a-fA-F; STRETCH hex digits, '.' and '-'
local DIGIT, HEX, LETTER, STRETCH = {}, {}, {}, {[45] = true, [46] = true}
for b = 48, 57 do DIGIT[b], HEX[b], STRETCH[b] = true, true, true end
for b = 65, 70 do
  HEX[b], LETTER[b], STRETCH[b], HEX[b + 32], LETTER[b + 32], STRETCH[b + 32] = true, true, true, true, true, true
end
-- what follows a UUID's first 8 hex digits
local X4 = '[0-9a-fA-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F]'
local UUID_TAIL = '^%-' .. X4 .. '%-' .. X4 .. '%-' .. X4 .. '%-' .. X4 .. X4 .. X4

-- the key being put: its pieces, the bytes and the printable ASCII characters in them
-- (counted from when the bytes first pass `limit`), and whether it is cut
local out, n, size, shown, counted, limit, cut = {}, 0, 0, 0, 0, 0, false

local function put(piece)
  n = n + 1
  out[n] = piece
  size = size + #piece
  if size <= limit then return end
  for k = counted + 1, n do shown = shown + select(2, string.gsub(out[k], '[!-~]', '', limit + 1)) end
  counted, cut = n, shown > limit
end

-- the end of the <hex> that starts at a hex run's first byte r (a UUID, or the run
-- when 8 or more long and holding a digit; nil when none), and the run's end
local function hex_end(s, r)
  local _, l = string.find(s, '^[a-fA-F]*', r)
  local _, h = string.find(s, '^[0-9a-fA-F]*', l + 1)
  if h == r + 7 and string.find(s, UUID_TAIL, r + 8) and not HEX[string.byte(s, r + 36)] then return r + 35, h end
  if h - r >= 7 and h > l then return h, h end
  return nil, h
end

-- the hex run s[r..h] that is no <hex>: its letters as they are, each number -> <num>;
-- a number that ends the run takes the '.' and the digits opening the next run when
-- that run is no <hex>. Answers where the next piece starts.
local function run(s, r, h)
  while r <= h and not cut do
    local _, e = string.find(s, '^[a-fA-F]*', r)
    if e >= r then
      put(string.sub(s, r, e))
    else
      _, e = string.find(s, '^[0-9]*', r)
      if e == h and string.byte(s, e + 1) == 46 and DIGIT[string.byte(s, e + 2)] then
        local x, next_h = hex_end(s, e + 2)
        if not x then
          _, e = string.find(s, '^[0-9]*', e + 2)
          h = next_h
        end
      end
      put('<num>')
    end
    r = e + 1
  end
  return r
end

-- the stretch s[a..e]: runs of dots and dashes as they are, then each hex run
local function stretch(s, a, e)
  local r = a
  while r <= e and not cut do
    local _, h = string.find(s, '^[.-]*', r)
    if h >= r then
      put(string.sub(s, r, h))
      r = h + 1
    else
      local x
      x, h = hex_end(s, r)
      if x then
        put('<hex>')
        r = x + 1
      else
        r = run(s, r, h)
      end
    end
  end
end

-- the first of the hex letters that run up to t, none before i (a long run is
-- measured on the bytes reversed: a byte loop costs ten times a find)
local function run_start(s, i, t)
  local a = t
  while a > i and LETTER[string.byte(s, a - 1)] do
    a = a - 1
    if t - a > 8 then return t - select(2, string.find(string.reverse(string.sub(s, i, t - 1)), '^[a-fA-F]*')) end
  end
  return a
end

-- the first digit or dash of s at or after i (nil: none)
local function mark_at(s, i)
  local _, e = string.find(s, '^[^0-9-]*', i)
  if e < #s then return e + 1 end
end

-- the key of text, cut once it holds more than `length` printable ASCII characters, and
-- the pieces put (the work it took)
local function signature_key(text, length)
  local q1, q2, t = string.find(text, "'", 1, true), string.find(text, '"', 1, true), mark_at(text, 1)
  if not (q1 or q2 or t) then return text, 0 end
  n, size, shown, counted, limit, cut = 0, 0, 0, 0, length, false
  local i = 1
  while not cut do
    local q = q1
    if q2 and (not q or q2 < q) then q = q2 end
    if t and (not q or t < q) then
      local a = run_start(text, i, t)
      if a > i then put(string.sub(text, i, a - 1)) end
      local _, e = string.find(text, '^[0-9]*', t)
      if a == t and e - t < 7 and not STRETCH[string.byte(text, e + 1)] then
        put('<num>') -- a number alone, the most common stretch
      else
        _, e = string.find(text, '^[0-9a-fA-F.-]*', t)
        stretch(text, a, e)
      end
      i = e + 1
      t = mark_at(text, i)
    elseif q then
      local close = string.find(text, q == q1 and "'" or '"', q + 1, true)
      if close then
        if q > i then put(string.sub(text, i, q - 1)) end
        put('<str>')
        i = close + 1
        if t and t < i then t = mark_at(text, i) end
        if q1 and q1 < i then q1 = string.find(text, "'", i, true) end
        if q2 and q2 < i then q2 = string.find(text, '"', i, true) end
      elseif q == q1 then
        q1 = nil
      else
        q2 = nil
      end
    else
      break
    end
  end
  if not cut and i <= #text then put(string.sub(text, i)) end
  return table.concat(out, '', 1, n), n
end
