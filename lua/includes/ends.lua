-- The ends of a sorted set as a watching look reads them (health's sample, the lanes'
-- heads), no member copied that was not measured first: no command answers a member's
-- length and reading one copies it whole, and a score is found without reading its
-- member (score_search.lua).
--@include score_search

-- members before the one measured at most (`readable_at`): MEMORY USAGE walks them
local MEASURED_RANK = 10000
-- a set of at most so many members is measured whole, each member walked: the usual
-- set, whose every member is then read as before, no search
local WHOLE_WALK = 4096

-- what a look knows of sorted set `key`'s members before reading any, asked once a set:
-- `n` members (ZCARD, unless the caller counted them: `n`; 0: none, or a key of another
-- type); `all`, true when every member may be read: MEMORY USAGE ... SAMPLES n of a set
-- of at most WHOLE_WALK members is all its bytes, within `most`; else `usage`, MEMORY
-- USAGE ... SAMPLES 1 (O(1)). Where MEMORY can not be asked (the embedded fake; an ACL
-- user without it) `free` says whether every member may be read all the same: only when
-- `measured_only` is false (the fake: this process's own memory, no server to hold)
local function probe(key, most, measured_only, n)
  n = n or redis.pcall('ZCARD', key)
  if type(n) ~= 'number' or n == 0 then return {n = 0} end
  local walked = n <= WHOLE_WALK
  local usage = redis.pcall('MEMORY', 'USAGE', key, 'SAMPLES', tostring(walked and n or 1))
  if type(usage) ~= 'number' then return {key = key, n = n, free = not measured_only} end
  local p = {key = key, n = n, most = most, usage = usage}
  if walked then
    if usage <= most then
      p.all = true
    else
      p.usage = redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '1')
    end
  elseif redis.call('OBJECT', 'ENCODING', key) == 'listpack' then
    -- more members than WHOLE_WALK in a listpack (an operator raised
    -- zset-max-listpack-entries): its one figure is all its bytes, and a search would
    -- walk it whole at each step (`searchable`)
    p.listpack = true
    p.all = usage <= most
  end
  return p
end

-- true when the scores of probed set `p` may be searched by ZCOUNTs (`top_score`,
-- `bottom_score`): each is O(log n) in a skiplist, but walks a listpack (one RESTOREd
-- under a raised zset-max-listpack-entries may hold 1,000,000 members)
local function searchable(p)
  return not p.listpack
end

-- true when every member of probed set `p` may be read
local function all_readable(p)
  if p.free ~= nil then return p.free end
  return p.all == true
end

-- true for member `rank` (0: the head) of probed set `p` a look may read; else false
-- and its bytes as measured (-1: not measurable). A skiplist's MEMORY USAGE ... SAMPLES
-- k is the mean of its first k members (each with its node) times its count, plus the
-- set's own bytes (Valkey's objectComputeSize walks from the head): the head's bytes are
-- at most the one figure (about it over the count), a later member's two figures apart
-- (a rank past MEASURED_RANK is not measured); a listpack's figure is all its bytes
local function readable_at(p, rank)
  if p.free ~= nil then
    if p.free then return true end
    return false, -1
  end
  if p.all or (rank == 0 and p.usage <= p.most) then return true end
  local size
  if p.listpack or redis.call('OBJECT', 'ENCODING', p.key) == 'listpack' then
    size = p.usage
  elseif rank == 0 then
    size = math.ceil(p.usage / p.n)
  elseif rank < MEASURED_RANK then
    local upto = redis.call('MEMORY', 'USAGE', p.key, 'SAMPLES', tostring(rank + 1))
    local before = redis.call('MEMORY', 'USAGE', p.key, 'SAMPLES', tostring(rank))
    size = math.max(0, math.ceil((upto * (rank + 1) - before * rank) / p.n))
  else
    return false, -1
  end
  if size <= p.most then return true end
  return false, size
end

