-- @promote_job -- one scheduled job (delayed, or waiting to retry) becomes ready now:
-- pending, or its lane for a grouped job, at its priority.
-- KEYS[1] = the row, KEYS[2] = schedule, KEYS[3] = the queue base root ; ARGV[1] = id
-- returns 1; -1 for a missing row; EMQSTATE not scheduled for a job not in the
-- schedule set; EMQSTATE bad row <field> in <where> (field `type` for a row or a lane
-- meta of another type than a hash). Every check runs before the first write.
--@include common
--@include lanes
local jk, schedule, base, id = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
if redis.call('EXISTS', jk) == 0 then return -1 end
if not redis.call('ZSCORE', schedule, id) then return redis.error_reply('EMQSTATE not scheduled') end
-- a key of another type under the row's name (another client's): bad row 'type'
local g, refused = row_field(jk, 'group', id)
if refused then return refused end
local nums, bad = row_wholes(jk)
if not nums then return bad_row(bad, id) end
if g then
  refused = lane_refusal(base, g)
  if refused then return refused end
end
-- every check has run: now the writes
redis.call('ZREM', schedule, id)
redis.call('HSET', jk, 'state', 'pending')
make_ready(base, id, g, nums.priority)
emit(base, {event = 'promoted', job = id})
return 1
