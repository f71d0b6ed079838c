-- The error signature's replacements, made in one pass over a text: what
-- emq_notebook.triage.signature does before it collapses whitespace, strips and
-- cuts (tests/test_triage.py holds the two together), in its order:
--   1. each quoted part -> <str>: scanning left to right, a quote opens a part when
--      a quote of its kind follows it, and that one closes it;
--   2. each UUID (hex 8-4-4-4-12) and each run of 8 or more hex digits holding a
--      digit, with no hex digit either side -> <hex>;
--   3. each remaining number, digits with an optional dot and digits -> <num>.
-- Every replacement of 2 and 3 lies inside one *stretch*: a whole run of hex digits,
-- dots and dashes around a digit or a dash. Its neighbours are none of those (nor is
-- a <str>), so a stretch keys on its own as it would in the whole text; the plain
-- text between stretches and quoted parts (no digit, dash or quote) stays as it is.
--
-- Linear in the text's bytes: quotes are found with plain finds, the next digit or
-- dash and a stretch's end with anchored single greedy items (a run of bytes of one
-- class), a UUID with two such runs and its 16 middle bytes read at once; no byte is
-- scanned more than a few times and no pattern is built from a text.
--
-- A keyer (one per call: `signature_keyer()`) answers a text's key and the work it
-- took, in bytes (its caller counts them against a byte budget: READ_BYTES a part read,
-- CHECK_BYTES a number, UUID or quoted part checked against a family). It remembers the
-- texts it has keyed, and the *family* of each: its plain parts, and the kind of each
-- part between (a number, a UUID, a quoted part, another stretch with its key). A text
-- of a known family has that family's key when its plain parts are the same bytes in
-- the same places and each part between keys as the family's did; that is checked with
-- plain finds and one anchored match a part, so the plain text is not scanned byte by
-- byte. At most FAMILY_TRIES families are tried for one text, each check linear: the
-- keying stays linear. Definitions only.

-- bytes: DIGIT 0-9; HEX 0-9a-fA-F; STRETCH the hex digits, '.' and '-'
local DIGIT, HEX, STRETCH = {}, {}, {}
for b = 48, 57 do DIGIT[b], HEX[b], STRETCH[b] = true, true, true end
for b = 65, 70 do HEX[b], STRETCH[b], HEX[b + 32], STRETCH[b + 32] = true, true, true, true end
STRETCH[45], STRETCH[46] = true, true
-- the kinds of a family's parts: a number (digits alone, fewer than 8), a UUID, any
-- other stretch; a quoted part's kind is its quote's byte
local NUMBER, UUID, OTHER = 1, 2, 3
-- a family is learned from a text of at most LEARN_BYTES bytes and LEARN_PARTS parts;
-- a keyer keeps FAMILIES of them, found by a text's first HEAD bytes (fewer when its
-- first part comes sooner), at most FAMILY_TRIES tried for one text
local LEARN_BYTES, LEARN_PARTS, FAMILIES, HEAD, FAMILY_TRIES = 256, 32, 128, 24, 8
-- a part read, and a part checked against a family, as bytes of a step's work (about a
-- microsecond, and a third of one)
local READ_BYTES, CHECK_BYTES = 256, 64
-- emq_notebook.triage.SIGNATURE_LENGTH, and the texts long enough to be read only that
-- far (so never learned from: LEARN_BYTES is no more)
local SHOWN, CUT_FROM = 200, 256

-- a function text -> its key, for one call
local function signature_keyer()
  local find, sub, byte, gsub, concat = string.find, string.sub, string.byte, string.gsub, table.concat

  -- the first digit of s at or after i (nil: none); mark_at, the first digit or dash:
  -- the end of an anchored greedy run of the other bytes, which Lua's matcher scans in
  -- one loop (a search restarts the matcher at each byte: twice the cost)
  local function digit_at(s, i)
    local _, e = find(s, '^[^0-9]*', i)
    if e < #s then return e + 1 end
  end
  local function mark_at(s, i)
    local _, e = find(s, '^[^0-9-]*', i)
    if e < #s then return e + 1 end
  end

  -- true when a UUID's 36 bytes (hex 8-4-4-4-12) start at s[p]: two anchored runs of hex
  -- digits for the first and last groups, the 16 bytes between read at once
  local function uuid_at(s, p)
    local _, e = find(s, '^[0-9a-fA-F]*', p)
    if e ~= p + 7 then return false end
    local d1, a, b, c, d, d2, f, g, h, i, d3, j, k, l, m, d4 = byte(s, p + 8, p + 23)
    if d1 ~= 45 or d2 ~= 45 or d3 ~= 45 or d4 ~= 45 then return false end
    if not (HEX[a] and HEX[b] and HEX[c] and HEX[d] and HEX[f] and HEX[g] and HEX[h] and HEX[i]
      and HEX[j] and HEX[k] and HEX[l] and HEX[m]) then return false end
    _, e = find(s, '^[0-9a-fA-F]*', p + 24)
    return e >= p + 35
  end

  -- the numbers of s[i..j] -> <num>, onto out after n; d is the first digit of s at
  -- or after i (nil: none). Answers n and the first digit past what it read.
  local function numbers(s, i, j, out, n, d)
    while d and d <= j do
      local _, e = find(s, '^[0-9]*', d)
      if byte(s, e + 1) == 46 and e + 2 <= j and DIGIT[byte(s, e + 2)] then _, e = find(s, '^[0-9]*', e + 2) end
      if d > i then
        n = n + 1
        out[n] = sub(s, i, d - 1)
      end
      n = n + 1
      out[n] = '<num>'
      i = e + 1
      d = digit_at(s, i)
    end
    if i <= j then
      n = n + 1
      out[n] = sub(s, i, j)
    end
    return n, d
  end

  -- a stretch s keyed onto out after n: at the first byte of each hex run a UUID,
  -- else a run of 8 or more holding a digit, is <hex>; then the numbers between.
  -- Answers n and the stretch's kind (NUMBER, UUID, OTHER)
  local function stretch(s, out, n)
    local len = #s
    local _, digits = find(s, '^[0-9]*')
    if digits == len and len < 8 then
      n = n + 1
      out[n] = '<num>'
      return n, NUMBER
    end
    if len == 36 and uuid_at(s, 1) then
      n = n + 1
      out[n] = '<hex>'
      return n, UUID
    end
    local lit, r, d = 1, 1, digit_at(s, 1)
    while r <= len do
      local c = byte(s, r)
      if c == 45 or c == 46 then
        r = r + 1
      else
        local _, run_end = find(s, '^[0-9a-fA-F]*', r)
        local hex_end
        if run_end - r == 7 and len - r >= 35 and uuid_at(s, r) and not HEX[byte(s, r + 36)] then
          hex_end = r + 35
        elseif run_end - r >= 7 and select(2, find(s, '^[a-fA-F]*', r)) < run_end then
          hex_end = run_end
        end
        if hex_end then
          if d and d < lit then d = digit_at(s, lit) end
          n, d = numbers(s, lit, r - 1, out, n, d)
          n = n + 1
          out[n] = '<hex>'
          lit = hex_end + 1
        end
        r = (hex_end or run_end) + 1
      end
    end
    if d and d < lit then d = digit_at(s, lit) end
    return (numbers(s, lit, len, out, n, d)), OTHER
  end

  -- the pieces of a key being made, and of a family being learned (one table each for
  -- every text: a new one costs more than the pieces)
  local out, checked, scratch = {}, {}, {}

  -- the key of text read in full, the parts it read and, when `record` is true and the
  -- text has a family, its size: the family is then in `scratch`, {plain, kind, key,
  -- plain, kind, key, ..., plain} (the kind of a stretch, or a quote's byte, that quote
  -- then ending the plain part before it). A text has none when a quote that no quote
  -- of its kind follows lies in its plain text, or when its key is cut: a text over
  -- CUT_FROM bytes is read only until its key shows more than SHOWN characters that are
  -- no whitespace (printable ASCII), the key cut there, since the signature keeps its
  -- first SHOWN characters and no later byte can change them.
  local function read(text, record)
    local q1, q2 = find(text, "'", 1, true), find(text, '"', 1, true)
    local t = mark_at(text, 1)
    if not (q1 or q2 or t) then return text, 0 end
    local n, i, f, parts = 0, 1, 0, 0
    local shown = #text > CUT_FROM and 0
    while true do
      local q = q1
      if q2 and (not q or q2 < q) then q = q2 end
      local plain, from, kind
      if t and (not q or t < q) then
        -- the stretch around t; the bytes from i to t hold no digit or dash
        local a = t
        while a > i and STRETCH[byte(text, a - 1)] do a = a - 1 end
        plain = sub(text, i, a - 1)
        if a > i then
          n = n + 1
          out[n] = plain
        end
        from = n
        local _, e = find(text, '^[0-9]*', t)
        if a == t and e - t < 7 and not STRETCH[byte(text, e + 1)] then
          -- a number alone, the most common stretch
          n, kind = n + 1, NUMBER
          out[n] = '<num>'
        else
          _, e = find(text, '^[0-9a-fA-F.-]*', t)
          if e - a == 35 and uuid_at(text, a) then
            n, kind = n + 1, UUID
            out[n] = '<hex>'
          else
            n, kind = stretch(sub(text, a, e), out, n)
          end
        end
        i = e + 1
        t = mark_at(text, i)
      elseif q then
        local quote = q == q1 and "'" or '"'
        local close = find(text, quote, q + 1, true)
        if close then
          plain = sub(text, i, q - 1)
          if q > i then
            n = n + 1
            out[n] = plain
          end
          from, n, kind = n, n + 1, byte(quote)
          out[n] = '<str>'
          i = close + 1
          if t and t < i then t = mark_at(text, i) end
          if q1 and q1 < i then q1 = find(text, "'", i, true) end
          if q2 and q2 < i then q2 = find(text, '"', i, true) end
        else
          -- no quote of its kind follows: none of them opens a part
          if quote == "'" then q1 = nil else q2 = nil end
          record = false
        end
      else
        break
      end
      if from then
        parts = parts + 1
        if record then
          -- a quoted part's opening quote goes with the plain part before it, so one
          -- plain find checks both; a part but another stretch keys as one token
          scratch[f + 1] = kind > OTHER and plain .. (kind == 39 and "'" or '"') or plain
          scratch[f + 2] = kind
          scratch[f + 3] = kind == OTHER and concat(out, '', from + 1, n) or out[n]
          f = f + 3
        end
        if shown then
          shown = shown + select(2, gsub(plain, '[!-~]', ''))
          for k = from + 1, n do shown = shown + #out[k] end
          if shown > SHOWN then return concat(out, '', 1, n), parts end
        end
      end
    end
    if i <= #text then
      n = n + 1
      out[n] = sub(text, i)
    end
    if record then scratch[f + 1] = sub(text, i) end
    return concat(out, '', 1, n), parts, record and f + 1
  end

  -- true when text is of `family` (so its key is the family's)
  local function fits(text, family)
    local pos = 1
    for j = 1, #family - 1, 3 do
      local plain, kind = family[j], family[j + 1]
      if plain ~= '' then
        if find(text, plain, pos, true) ~= pos then return false end
        pos = pos + #plain
      end
      local _, e
      if kind == NUMBER then
        _, e = find(text, '^[0-9]*', pos)
        if e < pos or e - pos > 6 then return false end
      elseif kind == UUID then
        if not uuid_at(text, pos) then return false end
        e = pos + 35
      elseif kind == OTHER then
        if not STRETCH[byte(text, pos)] then return false end
        _, e = find(text, '^[0-9a-fA-F.-]*', pos)
        local n = stretch(sub(text, pos, e), checked, 0)
        if concat(checked, '', 1, n) ~= family[j + 2] then return false end
      else
        -- the plain part ended with the opening quote: find the closing one
        e = find(text, kind == 39 and "'" or '"', pos, true)
        if not e then return false end
      end
      -- the next plain part (or a quote, or the end) bounds the stretch: checked next
      pos = e + 1
    end
    local last = family[#family]
    if last ~= '' and find(text, last, pos, true) ~= pos then return false end
    return pos + #last == #text + 1
  end

  -- the families learned, by the length h of their head and their first h bytes: a
  -- list of (family, its key, the work of checking a text against it) each
  local known, heads, by_head, learned = {}, {}, {}, 0

  -- the family of size `size` in scratch, learned with its key
  local function learn(size, key)
    if learned >= FAMILIES or size > 3 * LEARN_PARTS + 1 then return end
    local family = {unpack(scratch, 1, size)}
    -- a stretch that is no number or UUID is keyed again, as when read
    local cost = 0
    for j = 2, size - 1, 3 do cost = cost + (family[j] == OTHER and READ_BYTES or CHECK_BYTES) end
    local h = #family[1] < HEAD and #family[1] or HEAD
    local heads_of = by_head[h]
    if not heads_of then
      heads_of = {}
      by_head[h] = heads_of
      heads[#heads + 1] = h
    end
    local head = sub(family[1], 1, h)
    local bucket = heads_of[head]
    if not bucket then
      bucket = {}
      heads_of[head] = bucket
    end
    local b = #bucket
    bucket[b + 1], bucket[b + 2], bucket[b + 3] = family, key, cost
    learned = learned + 1
  end

  -- the key of text, and the work it took in bytes (none for a text met before): a text
  -- met before; else through the first of its families (FAMILY_TRIES at most) that
  -- fits; else read
  return function(text)
    local key = known[text]
    if key then return key, 0 end
    local work, tries = 0, FAMILY_TRIES
    for k = 1, #heads do
      local h = heads[k]
      local bucket = by_head[h][sub(text, 1, h)]
      if bucket then
        for b = 1, #bucket, 3 do
          work = work + bucket[b + 2]
          if fits(text, bucket[b]) then
            key = bucket[b + 1]
            known[text] = key
            return key, work
          end
          tries = tries - 1
          if tries == 0 then break end
        end
        if tries == 0 then break end
      end
    end
    local parts, size
    key, parts, size = read(text, #text <= LEARN_BYTES)
    if size then learn(size, key) end
    known[text] = key
    return key, work + parts * READ_BYTES
  end
end
