-- @errors -- one bounded step of grouping one set's rows by their last_error (extension).
--@readonly
-- KEYS[1] = the set (a state set or a lane's backlog), KEYS[2] = the queue base root
-- ARGV[1], ARGV[2] = the cursor, as @find; ARGV[3] = budget, members examined at most;
-- ARGV[4] = bytes of work at most: each member's id, the last_error texts read, and
-- PIECE_BYTES for each piece of a key put; the step ends after the member that reaches
-- it, or before one whose id and text would pass it (each measured before any is read:
-- cursor.lua `scan_step`), unless that is the step's first; ARGV[5] = the signature's
-- length (emq_notebook.triage.SIGNATURE_LENGTH): a text is read until its key holds more
-- printable characters than that
-- returns {score, member, more, group...}: the cursor and more as @find; each group is
-- {key, count, least score, greatest score, sample id, sample error} for the rows of this
-- step whose last_error has that key (includes/signature.lua: the text with
-- emq_notebook.triage.signature's replacements, before it collapses whitespace, strips
-- and cuts), so a step sends about one group per signature. A row with no last_error
-- counts under '' (its sample error nil); a member with no row, a foreign id (ids.lua
-- `foreign_id`) and a key that is no hash are examined (each costs budget) and not
-- counted. No last_error over ARGV[4] bytes is copied (each measured first, measured.lua
-- `over_fields`): such a row counts under '<over ARGV[4] bytes>' (its digits: no text's
-- key holds one), its sample error the sample's length (a number).
--@include reads
--@include cursor
--@include signature
local set, base, length = KEYS[1], KEYS[2], tonumber(ARGV[5])
local start = rank_after(set, ARGV[1], ARGV[2])
-- a piece of a key put, as bytes of a step's work
local PIECE_BYTES = 64

-- rows come in score order: a group's first row has its least score, its last the
-- greatest; the groups hold those rows' ids until their scores are read, below
local groups, order = {}, {}
local OVER = '<over ' .. string.format('%d', tonumber(ARGV[4])) .. ' bytes>'
local function count(id, rows, at)
  if foreign_id(id) then return 0 end
  local text, key, pieces = rows[at + 1], '', 0
  if type(text) == 'number' then
    key = OVER
  elseif text then
    key, pieces = signature_key(text, length)
  end
  if text or redis.call('TYPE', base .. 'job:' .. id).ok == 'hash' then
    local g = groups[key]
    if g then
      g[2], g[4] = g[2] + 1, id
    else
      g = {key, 1, id, id, id, text or false}
      groups[key] = g
      order[#order + 1] = g
    end
  end
  return pieces * PIECE_BYTES
end
local examined, last = scan_step(set, base, start, tonumber(ARGV[3]), tonumber(ARGV[4]), {'last_error'}, count)
if examined == 0 then return cursor_head(set, 0, start, ARGV[1], ARGV[2]) end

-- the scores of each group's first and last rows and of the last member examined
local ends = {}
for _, g in ipairs(order) do
  ends[#ends + 1] = g[3]
  ends[#ends + 1] = g[4]
end
ends[#ends + 1] = last
local scores = scores_of(set, ends)
for k, g in ipairs(order) do
  g[3], g[4] = scores[2 * k - 1], scores[2 * k]
end
local out = cursor_head(set, examined, start, ARGV[1], ARGV[2], last, scores[#ends])
for _, g in ipairs(order) do out[#out + 1] = g end
return out
