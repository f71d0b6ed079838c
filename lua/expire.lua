-- @expire -- lease expiry: an in-flight job whose lease deadline passed goes
-- back to pending (or its lane), `stalled` counted, its lock removed.
-- KEYS[1] = active, KEYS[2] = the queue base root ; ARGV[1] = budget
-- returns the number of jobs put back (at most the budget). A ghost (a member
-- with no row) leaves the set, uncounted; a bad row (or its lane's meta) is
-- skipped and left where it is, with a `bad_row` event, and costs no budget.
--@include common
--@include lanes
local base = KEYS[2]
local budget = tonumber(ARGV[1])
local now = now_ms()
local moved, skipped = 0, 0
while moved < budget do
  local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', skipped, budget - moved)
  if #ids == 0 then break end
  for _, id in ipairs(ids) do
    local jk = base .. 'job:' .. id
    if redis.call('EXISTS', jk) == 0 then
      redis.call('ZREM', KEYS[1], id)
    else
      local g = redis.call('HGET', jk, 'group')
      local nums, bad = row_wholes(jk)
      local refused = (not nums and bad_row(bad, id)) or (g and lane_refusal(base, g))
      if refused then
        skipped = skipped + 1
        skipped_bad_row(base, 'expire', id, refused)
      else
        -- this row's checks have run: now its writes
        redis.call('ZREM', KEYS[1], id)
        redis.call('DEL', jk .. ':lock')
        redis.call('HINCRBY', jk, 'stalled', 1)
        redis.call('HSET', jk, 'state', 'pending')
        if g then lane_release(base, g) end
        make_ready(base, id, g, nums.priority)
        emit(base, {event = 'stalled', job = id})
        moved = moved + 1
      end
    end
  end
end
return moved
