-- A walk in chunks bounded by members and bytes, the one every walking script uses.
-- No command answers a member's length, so a walk counts a member only once it has
-- read it: it reads one member first, each next chunk twice as many up to WALK_CHUNK,
-- never more than the bytes left cover at the costliest member yet, so a call reads
-- at most its byte budget plus one chunk. Reads only (the visits may write).
--@include constants

-- how many members the next chunk reads, and the size due after it: `chunk` at most,
-- `most` at most, and no more than `left` bytes cover at `costliest` bytes a member
-- (0: none read yet); one at least
local function next_chunk(chunk, most, left, costliest)
  local want = math.min(chunk, most)
  if costliest > 0 then want = math.min(want, math.floor(left / costliest)) end
  return math.max(1, want), math.min(2 * chunk, WALK_CHUNK)
end

-- the members of sorted set `set` from rank `from` (0-based) to before rank `upto`,
-- each handed in set order (`range`: ZRANGE, or ZREVRANGE for highest first) to
-- visit(id, score), which answers the bytes it read or wrote and true to end the step
-- after it; the step also ends once `bytes` are spent (after one member at least). A
-- member is costed ID_WORK times its id. Nothing in `set` may change until it ends: it
-- reads on by rank. Answers the members examined, the last one's id and score, and the
-- bytes spent.
local function each_member(set, from, upto, bytes, visit, range)
  local n, spent, longest, chunk, id, score = 0, 0, 0, 1, nil, nil
  range = range or 'ZRANGE'
  while from + n < upto do
    local want
    want, chunk = next_chunk(chunk, upto - from - n, bytes - spent, longest * ID_WORK)
    local page = redis.call(range, set, from + n, from + n + want - 1, 'WITHSCORES')
    for k = 1, #page, 2 do
      id, score, n = page[k], page[k + 1], n + 1
      if #id > longest then longest = #id end
      local cost, stop = visit(id, score)
      spent = spent + cost
      if stop or spent >= bytes then return n, id, score, spent end
    end
    if #page < 2 * want then break end
  end
  return n, id, score, spent
end

-- The members of set `key` from SSCAN cursor `cursor` ('0': the start), each handed to
-- visit(m), which answers the bytes it read, built or answers, and true to stop. SSCAN
-- answers whole buckets, so a chunk may hold more than it asked, and a cursor can not
-- stop inside one: a visit that stops ends the step with the cursor its chunk was read
-- from (that chunk is walked again). Otherwise a step ends after the chunk in hand once
-- `most` members are examined or `bytes` spent, and after `most` SSCAN calls (a sparse
-- set's may find none). Answers the cursor to go on from ('0': the walk is done), the
-- members examined, the bytes spent, and true when a visit stopped it. A key that is
-- no set is walked as an empty one.
local function each_lane(key, cursor, most, bytes, visit)
  local n, spent, longest, chunk, calls = 0, 0, 0, 1, 0
  repeat
    local want
    want, chunk = next_chunk(chunk, most - n, bytes - spent, longest * ID_WORK)
    local page = redis.pcall('SSCAN', key, cursor, 'COUNT', want)
    if page.err then return '0', n, spent end
    calls = calls + 1
    for _, m in ipairs(page[2]) do
      n = n + 1
      if #m > longest then longest = #m end
      local cost, stop = visit(m)
      spent = spent + cost
      if stop then return cursor, n, spent, true end
    end
    cursor = page[1]
  until cursor == '0' or n >= most or spent >= bytes or calls >= most
  return cursor, n, spent
end

-- the loop of the bulk verbs by id: ARGV[1] = work at most, ARGV[2] = bytes at most,
-- ARGV[3...] = the ids. visit(id) answers the id's word, the work it cost and the
-- bytes it read or freed; the loop stops once either budget is spent (after one id
-- at least, so every call makes progress). Answers the words of the ids examined, in
-- order: the caller sends the rest again.
local function each_id(argv, visit)
  local budget, bytes = tonumber(argv[1]), tonumber(argv[2])
  local out, work, spent = {}, 0, 0
  for i = 3, #argv do
    if work >= budget or spent >= bytes then break end
    local word, w, b = visit(argv[i])
    out[#out + 1] = word
    work, spent = work + w, spent + b
  end
  return out
end
