-- one step of a walk over a queue's lanes summing their backlog (@lane_backlog, @read_watch)
--@include reads
--@include ends

-- {cursor, examined, jobs, skipped, head, ...} of the lanes of the queue at `base` from
-- SSCAN cursor `cursor`, as @lane_backlog's header says: at most `most` lanes and `bytes`
-- bytes, the heads of the first `want` lanes with a backlog, each read only within
-- `longest` bytes (nil: every head read), measured first when `measured_only`
local function lane_sum(base, cursor, most, bytes, want, longest, measured_only)
  local jobs, skipped, heads = 0, 0, {}
  local walked, examined = each_lane(base .. 'groups', cursor, most, bytes, function(g)
    if foreign_lane(g) then
      skipped = skipped + 1
      return #g
    end
    local key = lane_pending(base, g)
    local n = redis.pcall('ZCARD', key)
    if type(n) ~= 'number' then
      skipped = skipped + 1
      return id_cost(g)
    end
    jobs = jobs + n
    if n > 0 and #heads < want then
      if longest then
        local ok, size = readable_at(probe(key, longest, measured_only, n), 0)
        if not ok then
          heads[#heads + 1] = size
          return id_cost(g)
        end
      end
      local head = redis.call('ZRANGE', key, 0, 0)[1]
      heads[#heads + 1] = head
      return id_cost(g) + #head
    end
    return id_cost(g)
  end)
  local out = {walked, examined, jobs, skipped}
  for _, h in ipairs(heads) do out[#out + 1] = h end
  return out
end
