-- @move_hold -- hold a batch of the move journal for its caller, to finish it: its own
-- batch (the lease renewed), or one whose lease has passed, or any with 'force' (the
-- caller knows its owner is gone) (extension).
-- KEYS[1] = the queue base root
-- ARGV[1] = the batch; ARGV[2] = the owner; ARGV[3] = the lease (ms); ARGV[4] = 'force' or ''
-- returns {'held', the target}; {'busy', the lease's end (ms), the target} when another
-- owner's lease holds it; {'gone'} when the journal holds no such batch (finished).
--@include common
local base, batch, owner = KEYS[1], ARGV[1], ARGV[2]
local journal = base .. 'moving'
local entry = redis.call('HGET', journal, batch)
if not entry then return {'gone'} end
local now = now_ms()
-- an entry this toolkit did not write holds no lease: any caller may take it
local held_by, till, target = string.match(entry, '^(%S+) (%d+) (%S+)$')
if not held_by then return {'gone'} end
if held_by ~= owner and tonumber(till) > now and ARGV[4] ~= 'force' then
  return {'busy', till, target}
end
redis.call('HSET', journal, batch, owner .. ' ' .. string.format('%.0f', now + tonumber(ARGV[3])) .. ' ' .. target)
return {'held', target}
