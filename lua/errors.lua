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
local UUID = '%f[%x]' .. string.rep('%x', 8) .. '%-' .. string.rep('%x', 4) .. '%-' .. string.rep('%x', 4)
  .. '%-' .. string.rep('%x', 4) .. '%-' .. string.rep('%x', 12) .. '%f[^%x]'
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

local start = rank_after(set, ARGV[1], ARGV[2])
local batch = redis.call('ZRANGE', set, start, start + tonumber(ARGV[3]) - 1, 'WITHSCORES')
-- the batch comes in score order: a group's first row has its least score, its last the greatest
local groups, order = {}, {}
for i = 1, #batch, 2 do
  local id, score = batch[i], batch[i + 1]
  local jk = base .. 'job:' .. id
  local text = redis.call('HGET', jk, 'last_error')
  if text or redis.call('EXISTS', jk) == 1 then
    local key = text and key_of(text) or ''
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
