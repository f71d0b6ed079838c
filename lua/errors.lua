-- @errors -- one bounded step of grouping one set's rows by their last_error (extension).
--@readonly
-- KEYS[1] = the set (a state set or a lane's backlog), KEYS[2] = the queue base root
-- ARGV[1], ARGV[2] = the cursor, as @find; ARGV[3] = budget, members examined at most
-- returns {score, member, more, group...}: the cursor and more as @find; each group
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
  while single or double do
    local at, quote
    if single and (not double or single < double) then at, quote = single, "'" else at, quote = double, '"' end
    local close = find(text, quote, at + 1, true)
    if not close then
      -- no quote of this kind closes: the rest of them stay as they are
      if quote == "'" then single = nil else double = nil end
    else
      n, dash = segment_key(text, i, at - 1, n, dash)
      if not n then return key_of(text) end
      if dash and dash <= close then dash = find(text, '-', close + 1, true) end
      n = n + 1
      PIECES[n] = '<str>'
      i = close + 1
      if single and single <= close then single = find(text, "'", i, true) end
      if double and double <= close then double = find(text, '"', i, true) end
    end
  end
  n = segment_key(text, i, #text, n, dash)
  if not n then return key_of(text) end
  if n == 1 then return PIECES[1] end
  return table.concat(PIECES, '', 1, n)
end

local start = rank_after(set, ARGV[1], ARGV[2])
local batch = redis.call('ZRANGE', set, start, start + tonumber(ARGV[3]) - 1, 'WITHSCORES')
-- the batch comes in score order: a group's first row has its least score, its last the greatest
local groups, order, seen = {}, {}, {}
for i = 1, #batch, 2 do
  local id, score = batch[i], batch[i + 1]
  local jk = base .. 'job:' .. id
  local text = redis.call('HGET', jk, 'last_error')
  if text or redis.call('EXISTS', jk) == 1 then
    -- the same text again (a fixed message) is not read twice
    local key = ''
    if text then
      key = seen[text]
      if not key then
        key = fast_key(text)
        seen[text] = key
      end
    end
    local g = groups[key]
    if g then
      g[2], g[4] = g[2] + 1, score
    else
      g = {key, 1, score, score, id, text or false}
      groups[key] = g
      order[#order + 1] = g
    end
  end
end
local out = cursor_head(set, batch, #batch / 2, start, ARGV[1], ARGV[2])
for _, g in ipairs(order) do out[#out + 1] = g end
return out
