-- a resumable place in a sorted set, kept as (score, member) rather than as a rank,
-- so a scan in bounded calls stays right while members come and go: each call starts
-- just after the last member the previous one examined, wherever that place is now;
-- and the bounded read of one step of such a scan (a chunked walk, chunks.lua, of rows
-- measured before any field is read, measured.lua). Reads only.
--@include ids
--@include measured
--@include chunks

-- true when member `a` sorts after `b` at an equal score: byte order, as the set
-- keeps it (Lua's own `>` on strings follows the server's locale)
local function sorts_after(a, b)
  if a == b then return false end
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x > y end
  end
  return #a > #b
end

-- the rank of the first member after the place (score, member); score '' is the start
local function rank_after(key, score, member)
  if score == '' then return 0 end
  local now = redis.call('ZSCORE', key, member)
  if now and tonumber(now) == tonumber(score) then return redis.call('ZRANK', key, member) + 1 end
  -- the member left (or moved): every member scored below the place precedes it, every
  -- one scored above follows it; among those of its score, byte order decides
  local lo = redis.call('ZCOUNT', key, '-inf', '(' .. score)
  local hi = redis.call('ZCOUNT', key, '-inf', score)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if sorts_after(redis.call('ZRANGE', key, mid, mid)[1], member) then hi = mid else lo = mid + 1 end
  end
  return lo
end

-- One step of a scan: the members of `set` from rank `start`, each handed to
-- visit(id, row, at, left) in set order with its row's `fields` (row[at + k] the k-th:
-- its text; false where the row or the field is missing; a field over `bytes`, or over
-- caps[k] when `caps` (optional) names one, its length, a number, its bytes not read)
-- and the bytes left once they are counted. The step stops after `budget` members, or
-- after the member at which the bytes counted reach `bytes`: the bytes of its id
-- (another node's may be long, and a key is built of it) and of the fields it read,
-- and what visit answers (the work it did past reading them, in bytes: what it sends
-- back, what it matched), or false to stop there. Each row is measured before any field
-- of it is read (measured.lua `over_fields`), so a member whose id and fields would take
-- the step past `bytes` ends it before that member is read, unless it is the step's
-- first (read whatever it holds: its id and at most `bytes` a field, or its caps): a
-- chunk of 8 rows of 4 fields of 1 MiB would copy 32 MiB. A chunk with no field over
-- `bytes` is read with one SORT_RO, any other chunk, a set kept as a listpack (SORT
-- would rewrite its bytes) or a user whose ACL refuses reading keys by a pattern reads
-- each row with an HMGET of the fields within `bytes`. Answers the number of members
-- examined and the last one's id.
local function scan_step(set, base, start, budget, bytes, fields, visit, caps)
  local width, sort = #fields + 1, nil
  if #fields > 0 then
    local encoding = redis.pcall('OBJECT', 'ENCODING', set)
    -- a server with no encodings to keep (no OBJECT command: fakeredis) reads any set so
    if encoding == 'skiplist' or (type(encoding) == 'table' and encoding.err ~= nil) then
      sort = {set, 'BY', 'nosort', 'LIMIT', 0, 0, 'GET', '#'}
      for _, f in ipairs(fields) do
        sort[#sort + 1] = 'GET'
        sort[#sort + 1] = base .. 'job:*->' .. f
      end
    end
  end
  local examined, spent, largest, last, chunk = 0, 0, 1, nil, 1
  while examined < budget and spent < bytes do
    local want
    want, chunk = next_chunk(chunk, budget - examined, bytes - spent, largest)
    local ids = redis.call('ZRANGE', set, start + examined, start + examined + want - 1)
    if #ids == 0 then break end
    -- each row's fields over `bytes` (false: no hash; nil: no key built, or no field),
    -- and the members that fit the bytes left: the chunk ends before one that does not
    -- (a row measured whole counts as its figure, more than it holds: the next chunk
    -- counts again from what was read), the step when it is the chunk's first
    local measured, plain, left, kept = {}, sort ~= nil, bytes - spent, #ids
    for i, id in ipairs(ids) do
      local cost, m = #id, nil
      if #fields > 0 and not foreign_id(id) then
        local over, lengths, within = over_fields(base .. 'job:' .. id, fields, bytes, left - cost, caps)
        m, cost = over and {over, lengths} or false, cost + (within or 0)
      end
      if cost > left and (examined > 0 or i > 1) then
        kept = i - 1
        break
      end
      left, measured[i] = left - cost, m
      if #id > MAX_ID or (m and #m[1] > 0) then plain = false end
    end
    if kept == 0 then return examined, last end
    local rows = nil
    if plain then
      sort[5], sort[6] = start + examined, kept
      rows = redis.pcall('SORT_RO', unpack(sort))
      if rows.err then sort, rows = nil, nil end
    end
    if not rows then
      rows = {}
      for i = 1, kept do
        local id = ids[i]
        rows[#rows + 1] = id
        -- a key that is no hash (another job's :logs list) reads as a row with no
        -- field, and so does a foreign id's (no key is built of it)
        local m, values, lengths = measured[i], {}, {}
        if m then
          values = within_fields(base .. 'job:' .. id, fields, m[1], m[2])
          lengths = m[2]
        end
        for f = 1, #fields do rows[#rows + 1] = lengths[f] or values[f] or false end
      end
    end
    for at = 1, #rows, width do
      local size = #rows[at]
      for f = 1, width - 1 do
        local v = rows[at + f]
        if type(v) == 'string' then size = size + #v end
      end
      if size > largest then largest = size end
      examined, last, spent = examined + 1, rows[at], spent + size
      local done = visit(rows[at], rows, at, bytes - spent)
      if done == false then return examined, last end
      spent = spent + done
      if spent >= bytes or examined >= budget then return examined, last end
    end
    if kept == #ids and #ids < want then break end
  end
  return examined, last
end

-- the scores of `ids` in `set`, in their order (ZMSCORE a thousand at a time: unpack
-- takes no more than a few thousand values)
local function scores_of(set, ids)
  local scores = {}
  for from = 1, #ids, 1000 do
    local read = redis.call('ZMSCORE', set, unpack(ids, from, math.min(#ids, from + 999)))
    for k = 1, #read do scores[from + k - 1] = read[k] end
  end
  return scores
end

-- a reply's head after examining `examined` members from rank `start`, the last of
-- them `last` at `score` (the next call's cursor; the old place when none was), and
-- 1 while members follow it
local function cursor_head(key, examined, start, place_score, place_member, last, score)
  local more = redis.call('ZCARD', key) > start + examined and 1 or 0
  if examined == 0 then return {place_score, place_member, more} end
  return {score, last, more}
end
