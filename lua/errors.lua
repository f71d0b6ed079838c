-- @errors -- one bounded step of grouping one set's rows by their last_error (extension).
--@readonly
-- KEYS[1] = the set (a state set or a lane's backlog), KEYS[2] = the queue base root
-- ARGV[1], ARGV[2] = the cursor, as @find; ARGV[3] = budget, members examined at most;
-- ARGV[4...] = the shapes the scan's earlier steps replied, five values each, passed
-- back as they came (trusted: a caller who passes others gets its own keys wrong)
-- returns {score, member, more, shapes, group...}: the cursor and more as @find; the
-- shapes learned in this step (below), for the next; each group
-- is {key, count, least score, greatest score, sample id, sample error} for the rows
-- of this step whose last_error reads as `key` once the signature's replacements are
-- made, in its order: quoted parts -> <str>; UUIDs and runs of 8 or more hex digits
-- holding a digit -> <hex>; numbers -> <num> (emq_notebook.triage.signature, which
-- then only collapses whitespace, strips and cuts; a test holds the two together).
-- So a step sends about one group per signature. A row with no last_error counts
-- under '' (its sample error nil); a member with no row is not counted.
--@include cursor
local set, base = KEYS[1], KEYS[2]

-- each quoted part -> <str>, scanning as the signature's regex does: at a quote, the
-- next quote of the same kind closes it; a quote with none after it stays as it is
local function quotes_out(text)
  local single, double = string.find(text, "'", 1, true), string.find(text, '"', 1, true)
  if not (single and double) then
    -- one kind of quote (or none): the scan is a plain left-to-right replacement
    if single then return (string.gsub(text, "'[^']*'", '<str>')) end
    if double then return (string.gsub(text, '"[^"]*"', '<str>')) end
    return text
  end
  local out, i = {}, 1
  while true do
    local at = string.find(text, '[\'"]', i)
    if not at then
      out[#out + 1] = string.sub(text, i)
      break
    end
    local close = string.find(text, string.sub(text, at, at), at + 1, true)
    if close then
      out[#out + 1] = string.sub(text, i, at - 1) .. '<str>'
      i = close + 1
    else
      out[#out + 1] = string.sub(text, i, at)
      i = at + 1
    end
  end
  return table.concat(out)
end

-- a UUID: hex 8-4-4-4-12 with no hex digit either side
local UUID_BODY = string.rep('%x', 8) .. '%-' .. string.rep('%x', 4) .. '%-' .. string.rep('%x', 4)
  .. '%-' .. string.rep('%x', 4) .. '%-' .. string.rep('%x', 12)
local UUID = '%f[%x]' .. UUID_BODY .. '%f[^%x]'
-- a whole run of 8 or more hex digits
local HEX_RUN = '%f[%x]' .. string.rep('%x', 8) .. '%x*'
-- a stretch of hex digits and dashes that starts with 8 hex digits: every UUID and
-- every run of 8 or more lies inside one, and one starts and ends where no hex digit
-- is next to it, so it is read on its own as the whole text would be
local STRETCH = string.rep('%x', 8) .. '[%x%-]*'

local function hex_run(run)
  if string.find(run, '%d') then return '<hex>' end
  return run
end

local function hex_out(stretch)
  return (string.gsub(string.gsub(stretch, UUID, '<hex>'), HEX_RUN, hex_run))
end

local function key_of(text)
  local key = string.gsub(quotes_out(text), STRETCH, hex_out)
  if not string.find(key, '%d') then return key end
  if string.find(key, '%d%.%d') then key = string.gsub(key, '%d+%.%d+', '<num>') end
  return (string.gsub(key, '%d+', '<num>'))
end

-- The same key, read in place: the whole-text form above makes five passes over the
-- text and copies it at each; this one finds the quotes (and dashes) with plain
-- finds and the digits with one '%d+' pass, and copies only the pieces between
-- what it replaces. Every replacement lies in a stretch of hex digits, dots and
-- dashes, and (but for a UUID with no digit) one that holds a digit; no stretch
-- crosses a quote, so each stretch with a digit is keyed on its own as the whole
-- text would key it. A UUID with no digit sends the text to the whole-text form.
local find, sub, byte = string.find, string.sub, string.byte
local UUID_AT = '^' .. UUID_BODY
local UUID_WHOLE = UUID_AT .. '$'
local IN_STRETCH, PIECES = {}, {}
-- what the last fast_key replaced, in text order: MARKS[2k - 1], MARKS[2k] the first
-- and last byte of each quoted part or keyed stretch, NMARKS of them (-1 when it
-- handed the text to the whole-text form)
local MARKS, NMARKS = {}, 0
for c in string.gmatch('0123456789abcdefABCDEF.-', '.') do IN_STRETCH[byte(c)] = true end

-- one stretch (a whole run of hex digits, dots and dashes) keyed
local function stretch_key(s)
  if #s < 8 then
    if not find(s, '[^%d]') then return '<num>' end
  elseif #s == 36 and find(s, UUID_WHOLE) then
    return '<hex>'
  else
    s = string.gsub(s, STRETCH, hex_out)
    if not find(s, '%d') then return s end
  end
  if find(s, '%d%.%d') then s = string.gsub(s, '%d+%.%d+', '<num>') end
  return (string.gsub(s, '%d+', '<num>'))
end

-- the first dash at or after `dash` that is not in text[.. upto], none of those
-- passed over opening a UUID that starts at or after `from`: false when one does
local function dashes_past(text, dash, from, upto)
  while dash and dash <= upto do
    if dash - 8 >= from and find(text, UUID_AT, dash - 8) then return false end
    dash = find(text, '-', dash + 1, true)
  end
  return dash
end

-- text[i..j] holds no quote: its pieces, each stretch with a digit keyed, onto
-- PIECES after the first n; answers the new n and the next dash past j, or nil
-- when a UUID with no digit lies there
local function segment_key(text, i, j, n, dash)
  while true do
    local p, digits_end = find(text, '%d+', i)
    if not p or p > j then break end
    local a = p
    while a > i and IN_STRETCH[byte(text, a - 1)] do a = a - 1 end
    -- the stretch is text[a..e]; a number alone or a UUID alone is keyed in place
    local key, e
    if a == p then
      if digits_end - p < 7 and not IN_STRETCH[byte(text, digits_end + 1)] then
        key, e = '<num>', digits_end
      else
        local _, uuid_end = find(text, UUID_AT, p)
        if uuid_end and not IN_STRETCH[byte(text, uuid_end + 1)] then key, e = '<hex>', uuid_end end
      end
    end
    if not key then e = select(2, find(text, '^[%x%.%-]*', p)) end
    dash = dashes_past(text, dash, i, a - 1)
    if dash == false then return nil end
    if dash and dash <= e then dash = find(text, '-', e + 1, true) end
    if a > i then
      n = n + 1
      PIECES[n] = sub(text, i, a - 1)
    end
    n = n + 1
    PIECES[n] = key or stretch_key(sub(text, a, e))
    NMARKS = NMARKS + 2
    MARKS[NMARKS - 1], MARKS[NMARKS] = a, e
    i = e + 1
  end
  dash = dashes_past(text, dash, i, j)
  if dash == false then return nil end
  if i <= j then
    n = n + 1
    PIECES[n] = sub(text, i, j)
  end
  return n, dash
end

-- key_of(text), read in place; the quoted parts scanned as quotes_out scans them
local function fast_key(text)
  local single, double = find(text, "'", 1, true), find(text, '"', 1, true)
  local dash = find(text, '-', 1, true)
  local n, i = 0, 1
  NMARKS = 0
  while single or double do
    local at, quote
    if single and (not double or single < double) then at, quote = single, "'" else at, quote = double, '"' end
    local close = find(text, quote, at + 1, true)
    if not close then
      -- no quote of this kind closes: the rest of them stay as they are
      if quote == "'" then single = nil else double = nil end
    else
      n, dash = segment_key(text, i, at - 1, n, dash)
      if not n then
        NMARKS = -1
        return key_of(text)
      end
      if dash and dash <= close then dash = find(text, '-', close + 1, true) end
      n = n + 1
      PIECES[n] = '<str>'
      NMARKS = NMARKS + 2
      MARKS[NMARKS - 1], MARKS[NMARKS] = at, close
      i = close + 1
      if single and single <= close then single = find(text, "'", i, true) end
      if double and double <= close then double = find(text, '"', i, true) end
    end
  end
  n = segment_key(text, i, #text, n, dash)
  if not n then
    NMARKS = -1
    return key_of(text)
  end
  if n == 1 then return PIECES[1] end
  return table.concat(PIECES, '', 1, n)
end

-- A shape: the pattern of the texts that key as a text keyed before in this step, so
-- such a text is keyed with one anchored match. What fast_key replaced becomes a
-- pattern of what keys the same, and the rest stays literal:
--   a quoted part -> any part in the same quotes;
--   a stretch of digits, dots and dashes with no run of 8 digits -> the same dots and
--     dashes with runs of 1 to 7 digits between (each reads <num>, and a dot joins two
--     into one number, as before);
--   a UUID -> any UUID;
--   a run of 8 or more hex digits -> any such run that holds a digit (checked after
--     the match: a pattern cannot say it);
--   any other stretch -> itself.
-- A text that matches splits as the one learned did: each literal part is the same
-- text, holds no digit (each is in a stretch fast_key keyed) and no quote (a text
-- with a quote left open has no shape), and ends, next to a replaced part, on a byte
-- that is no hex digit, dot or dash (a keyed stretch is a whole one). So it has the
-- same stretches and quoted parts in the same places, each keyed as the learned
-- one's was. Shapes are kept per step, found by the text's first HEAD bytes (or
-- fewer: up to the first replaced part), and bounded in number, in text length and
-- in how deep the pattern may nest (Lua's matcher recurses at each ? and *).
local HEAD, SHAPES_AT_MOST, PER_HEAD, LEARN_UP_TO = 16, 64, 8, 512
local NESTING, HEX_CHECKS = 120, 8 -- Lua 5.4's matcher stops at 200; captures at 32
local NUM = '%d' .. string.rep('%d?', 6)
local NUM_REPLACEMENT = (string.gsub(NUM, '%%', '%%%%'))
local HEX_RUN_AT = '()' .. string.rep('%x', 8) .. '%x*()'
local SHAPES, HEADS, NSHAPES = {}, {}, 0 -- SHAPES[h][first h bytes] = {pattern, key, checks, ...}
local LEARNED = {} -- the shapes learned in this step, for the reply

-- a literal part's pattern (each punctuation byte escaped: '%' and one reads as
-- itself), or nil when it holds a quote or a NUL (a NUL would end Lua 5.1's pattern)
local function literal(part)
  if find(part, "'", 1, true) or find(part, '"', 1, true) or find(part, '\0', 1, true) then return nil end
  return (string.gsub(part, '%p', '%%%0'))
end

-- a shape kept: the texts whose first h bytes are `head` and that match `pattern`
-- from byte h + 1 (each hex run it captures holding a digit, `checks` of them) key
-- as `key`; at most PER_HEAD a head (true when kept)
local function keep(h, head, pattern, key, checks)
  local by_head = SHAPES[h]
  if not by_head then
    by_head = {}
    SHAPES[h] = by_head
    HEADS[#HEADS + 1] = h
  end
  local known = by_head[head]
  if not known then
    known = {}
    by_head[head] = known
  elseif #known >= 3 * PER_HEAD then
    return false
  end
  known[#known + 1] = pattern
  known[#known + 1] = key
  known[#known + 1] = checks
  NSHAPES = NSHAPES + 1
  return true
end

-- the shape of `text`, just keyed by fast_key as `key`, kept when it has one
local function learn(text, key)
  if NMARKS < 0 or #text > LEARN_UP_TO then return end
  -- the head (literal) is found by equality, so the pattern starts after it
  local h = math.min(HEAD, (NMARKS > 0 and MARKS[1] or #text + 1) - 1)
  local head = sub(text, 1, h)
  if not literal(head) then return end
  local parts, at, nesting, checks = {'^'}, h + 1, 0, 0
  for m = 1, NMARKS + 1, 2 do
    -- a replaced part, or past the last one the end of the text
    local a, e = #text + 1, nil
    if m < NMARKS then a, e = MARKS[m], MARKS[m + 1] end
    if a > at then
      local part = literal(sub(text, at, a - 1))
      if not part then return end
      parts[#parts + 1] = part
    end
    if not e then break end
    local c = byte(text, a)
    if c == 39 or c == 34 then
      local q = sub(text, a, a)
      parts[#parts + 1] = q .. '[^' .. q .. ']*' .. q
      nesting = nesting + 1
    else
      local s = sub(text, a, e)
      if not find(s, '%a') and not find(s, '%d%d%d%d%d%d%d%d') then
        local pattern, runs = string.gsub(string.gsub(s, '%p', '%%%0'), '%d+', NUM_REPLACEMENT)
        parts[#parts + 1] = pattern
        nesting = nesting + 6 * runs
      elseif #s == 36 and find(s, UUID_WHOLE) then
        parts[#parts + 1] = UUID_BODY
      elseif #s >= 8 and not find(s, '[^%x]') then
        parts[#parts + 1] = HEX_RUN_AT
        nesting, checks = nesting + 1, checks + 1
      else
        parts[#parts + 1] = (string.gsub(s, '%p', '%%%0'))
      end
    end
    at = e + 1
  end
  if nesting > NESTING or checks > HEX_CHECKS then return end
  parts[#parts + 1] = '$'
  local shape = {h, head, table.concat(parts), key, checks}
  if keep(unpack(shape)) then
    for _, v in ipairs(shape) do LEARNED[#LEARNED + 1] = v end
  end
end

-- true when `text` matches `pattern` from `at` and each hex run it captured holds a digit
local function hex_runs_match(text, pattern, at)
  local found = {find(text, pattern, at)}
  if not found[1] then return false end
  for c = 3, #found, 2 do
    local d = find(text, '%d', found[c])
    if not d or d >= found[c + 1] then return false end
  end
  return true
end

-- key_of(text): through a shape met in this step, else read and its shape learned
local function shaped_key(text)
  for k = 1, #HEADS do
    local h = HEADS[k]
    local known = SHAPES[h][sub(text, 1, h)]
    if known then
      for s = 1, #known, 3 do
        if known[s + 2] == 0 then
          if find(text, known[s], h + 1) then return known[s + 1] end
        elseif hex_runs_match(text, known[s], h + 1) then
          return known[s + 1]
        end
      end
    end
  end
  local key = fast_key(text)
  if NSHAPES < SHAPES_AT_MOST then learn(text, key) end
  return key
end

-- the shapes this scan learned in its earlier steps, passed back as replied
for a = 4, #ARGV - 4, 5 do
  keep(tonumber(ARGV[a]), ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], tonumber(ARGV[a + 4]))
end
local start, budget = rank_after(set, ARGV[1], ARGV[2]), tonumber(ARGV[3])
-- the step's members with their last_error texts in one read, {id, text, ...}:
-- SORT_RO BY nosort walks a sorted set in its own order from rank `start` (a text is
-- false where the row or its field is missing). A user whose ACL does not let it
-- read keys by a pattern is refused that read: then the members come from ZRANGE and
-- each text from an HGET.
-- SORT turns a small set's listpack into a skiplist (the set's bytes change), so only a
-- set that is a skiplist already is read by a pattern; a server with no encodings to
-- keep (no OBJECT command: fakeredis) reads any set so
local encoding = redis.pcall('OBJECT', 'ENCODING', set)
local by_pattern = encoding == 'skiplist' or (type(encoding) == 'table' and encoding.err ~= nil)
local rows = by_pattern and redis.pcall('SORT_RO', set, 'BY', 'nosort', 'LIMIT', start, budget,
  'GET', '#', 'GET', base .. 'job:*->last_error')
if not rows or rows.err then
  rows = {}
  for k, id in ipairs(redis.call('ZRANGE', set, start, start + budget - 1)) do
    rows[2 * k - 1], rows[2 * k] = id, redis.call('HGET', base .. 'job:' .. id, 'last_error')
  end
end
-- rows come in score order: a group's first row has its least score, its last the
-- greatest; the groups hold those rows' ids until their scores are read, below
local groups, order = {}, {}
for i = 1, #rows, 2 do
  local id, text = rows[i], rows[i + 1]
  if text or redis.call('EXISTS', base .. 'job:' .. id) == 1 then
    local key = text and shaped_key(text) or ''
    local g = groups[key]
    if g then
      g[2], g[4] = g[2] + 1, id
    else
      g = {key, 1, id, id, id, text or false}
      groups[key] = g
      order[#order + 1] = g
    end
  end
end
local examined = #rows / 2
if examined == 0 then
  local out = cursor_head(set, rows, 0, start, ARGV[1], ARGV[2])
  out[4] = LEARNED
  return out
end
-- the scores of each group's first and last rows and of the last row examined, read
-- with ZMSCORE a thousand members at a time
local ends = {}
for _, g in ipairs(order) do
  ends[#ends + 1] = g[3]
  ends[#ends + 1] = g[4]
end
ends[#ends + 1] = rows[#rows - 1]
local scores = {}
for from = 1, #ends, 1000 do
  local read = redis.call('ZMSCORE', set, unpack(ends, from, math.min(#ends, from + 999)))
  for k = 1, #read do scores[from + k - 1] = read[k] end
end
for k, g in ipairs(order) do
  g[3], g[4] = scores[2 * k - 1], scores[2 * k]
end
-- the cursor's place is the last row examined: cursor_head reads it as a batch's pair
local last = {}
last[2 * examined - 1], last[2 * examined] = rows[#rows - 1], scores[#ends]
local out = cursor_head(set, last, examined, start, ARGV[1], ARGV[2])
out[4] = LEARNED
for _, g in ipairs(order) do out[#out + 1] = g end
return out
