-- @errors -- one bounded step of grouping one set's rows by their last_error (extension).
--@readonly
-- KEYS[1] = the set (a state set or a lane's backlog), KEYS[2] = the queue base root
-- ARGV[1], ARGV[2] = the cursor, as @find; ARGV[3] = budget, members examined at most
-- returns {score, member, more, group...}: the cursor and more as @find; each group
-- is {key, count, least score, greatest score, sample id, sample error} for the rows
-- of this step whose last_error, each ASCII digit read as 0, is `key`. A digit's value
-- never changes a signature, so the signature of the key is each text's; a row with
-- no last_error counts under '' (its sample error nil), a member with no row not at all.
--@include cursor
local set, base = KEYS[1], KEYS[2]
local start = rank_after(set, ARGV[1], ARGV[2])
local batch = redis.call('ZRANGE', set, start, start + tonumber(ARGV[3]) - 1, 'WITHSCORES')
local groups, order = {}, {}
for i = 1, #batch, 2 do
  local id, score = batch[i], batch[i + 1]
  local text = redis.call('HGET', base .. 'job:' .. id, 'last_error')
  if text or redis.call('EXISTS', base .. 'job:' .. id) == 1 then
    local key = text and string.gsub(text, '%d', '0') or ''
    local g = groups[key]
    local s = tonumber(score)
    if not g then
      g = {key = key, n = 0, lo = s, lo_text = score, hi = s, hi_text = score, id = id, text = text}
      groups[key] = g
      order[#order + 1] = g
    end
    g.n = g.n + 1
    if s < g.lo then g.lo, g.lo_text = s, score end
    if s > g.hi then g.hi, g.hi_text = s, score end
  end
end
local out = cursor_head(set, batch, #batch / 2, start, ARGV[1], ARGV[2])
for _, g in ipairs(order) do out[#out + 1] = {g.key, g.n, g.lo_text, g.hi_text, g.id, g.text or false} end
return out
