-- @repeat_tick -- every due repeatable produces one job and moves its next due
-- time past now (missed beats are skipped, not replayed).
-- KEYS[1] = the queue base root ; ARGV = fresh job ids, one per job it may make
-- returns the ids of the jobs produced
--@include common
--@include lanes
--@include enqueue_row
local base = KEYS[1]
local now = now_ms()
local due = redis.call('ZRANGEBYSCORE', base .. 'repeat', '-inf', now, 'WITHSCORES', 'LIMIT', 0, #ARGV)
local made = {}
for i = 1, #due, 2 do
  local name, at = due[i], tonumber(due[i + 1])
  local raw = redis.call('HGET', base .. 'repeat:defs', name)
  if raw then
    local def = cjson.decode(raw)
    local id = ARGV[#made + 1]
    add_job(base, id, def.payload, def.group or '', 0, 0, def.max_attempts or '1', '', '1000', now)
    table.insert(made, id)
    local beats = math.floor((now - at) / def.every) + 1
    redis.call('ZADD', base .. 'repeat', at + beats * def.every, name)
  else
    redis.call('ZREM', base .. 'repeat', name)
  end
end
return made
