-- what a watching look reads at the ends of a queue's sets (@read_ends, @read_watch): no
-- member copied that was not measured first, no score read through its member.
--@include ends

-- {head, band, overdue, due, newest, place, bytes, ...} of the queue at `base`, as
-- @read_ends's header says: `due_at` the due bound (ms), `most` the longest member read
-- (bytes), `measured_only` true to read only members measured within it, `now` (ms) where
-- the search for the newest dead job starts
local function queue_ends(base, due_at, most, measured_only, now)
  local head, band, overdue, due, newest = false, false, false, false, false
  local unread = {}

  -- {member, score} at `rank` of probed set `p` when a look may read it; else nil, and
  -- its place said when given (none: only its score is wanted, found without it)
  local function member(p, rank, place)
    local ok, size = readable_at(p, rank)
    if ok then
      local got = redis.call('ZRANGE', p.key, rank, rank, 'WITHSCORES')
      if got[1] then return {got[1], tonumber(got[2])} end
      return nil
    end
    if place then
      unread[#unread + 1] = place
      unread[#unread + 1] = size
    end
    return nil
  end

  -- a score read as a whole number at or below it; nil past 2^53 (another node's)
  local function whole(x)
    if not x or x ~= x or x > SCORE_SPAN or x < -SCORE_SPAN then return nil end
    return math.floor(x)
  end

  -- the highest score of probed set `p`: its last member's when every member may be read
  -- (the usual set), else found by ZCOUNTs from `from` (`top_score`)
  local function top(p, from, step, grow, near)
    if all_readable(p) then
      return whole(tonumber(redis.call('ZRANGE', p.key, -1, -1, 'WITHSCORES')[2]))
    end
    if not searchable(p) then return nil end
    if from then return top_score(p.key, from, step, grow, near) end
    -- no lowest score within the span (one of -inf under it): the search starts at 0
    return top_score(p.key, bottom_score(p.key) or 0, step, grow, near)
  end

  local pending = probe(base .. 'pending', most, measured_only)
  if pending.n > 0 then
    local first = member(pending, 0, 'head')
    if first then head = first[1] end
    if all_readable(pending) then
      -- the usual set: its last score and its band's first job read as before the guard
      local last = redis.call('ZRANGE', pending.key, -1, -1, 'WITHSCORES')[2]
      if last and first and whole(tonumber(last)) and tonumber(last) ~= first[2] then
        band = redis.call('ZRANGEBYSCORE', pending.key, last, last, 'LIMIT', 0, 1)[1] or false
      end
    else
      local last = top(pending, first and first[2], 1, 2, false)
      -- the band is the jobs of exactly the last score, which may be a fraction
      if last then last = exact_top(pending.key, last) end
      if last then
        local before = redis.call('ZCOUNT', pending.key, '-inf', '(' .. score_text(last))
        -- a band past MEASURED_RANK is not sampled on a server: its first member can not be
        -- measured cheaply (the figure stays a lower bound, as health says)
        if before > 0 and (before < MEASURED_RANK or pending.free) then
          local got = member(pending, before, 'band')
          if got then band = got[1] end
        end
      end
    end
  end
  local schedule = base .. 'schedule'
  local scheduled = redis.pcall('ZCOUNT', schedule, '-inf', due_at)
  if type(scheduled) == 'number' and scheduled > 0 then
    overdue = scheduled
    local p = probe(schedule, most, measured_only)
    local first = member(p, 0, nil)
    if first then
      due = whole(first[2]) or false
    elseif searchable(p) then
      due = bottom_score(schedule) or false
    end
  end
  local dead = probe(base .. 'dead', most, measured_only)
  if dead.n > 0 then newest = top(dead, now, 1024, 4, true) or false end
  local out = {head, band, overdue, due, newest}
  for i = 1, #unread do out[#out + 1] = unread[i] end
  return out
end
