-- @repeat_tick -- every due repeatable produces one job and moves its next due
-- time past now (missed beats are skipped, not replayed).
-- KEYS[1] = the queue base root ; ARGV = fresh job ids, one per job it may make
-- returns the ids of the jobs produced. A definition that does not decode, or
-- whose every / max_attempts is not a whole number >= 1, or whose payload or
-- group is not text, or that is over DEF_BYTES (includes/repeat_def.lua: never read), is
-- skipped and left as it is, with a `bad_row` event. Bounded by bytes as by jobs: once
-- the definitions read reach DEF_BYTES (one at least), the rest wait for the next tick
-- (ten due repeatables of 4 MiB made one call of 122 ms; ten of 512 KiB: two a call, 3.2 ms).
--@include common
--@include lanes
--@include enqueue_row
--@include repeat_def
local base = KEYS[1]
local now = now_ms()

local made, skipped, read = {}, 0, 0
while #made < #ARGV and read < DEF_BYTES do
  local due = redis.call('ZRANGEBYSCORE', base .. 'repeat', '-inf', now, 'WITHSCORES',
    'LIMIT', skipped, #ARGV - #made)
  if #due == 0 then break end
  for i = 1, #due, 2 do
    if read >= DEF_BYTES then break end
    local name, at = due[i], tonumber(due[i + 1])
    local raw, size = definition(base, name)
    if raw then read = read + size end  -- one over DEF_BYTES was measured, not read
    if not raw and size > 0 then
      skipped = skipped + 1
      emit(base, {event = 'bad_row', verb = 'tick', ['repeat'] = name,
        error = 'bad definition: ' .. size .. ' bytes, over ' .. DEF_BYTES})
    elseif raw then
      local def, bad = readable(raw)
      -- a due time of -inf (set by hand) has no next beat
      if def and at == -math.huge then def, bad = nil, 'due' end
      if def then
        local id = ARGV[#made + 1]
        add_job(base, id, def.payload, def.group or '', 0, 0, def.max_attempts, '', '1000', now)
        table.insert(made, id)
        local beats = math.floor((now - at) / def.every) + 1
        redis.call('ZADD', base .. 'repeat', at + beats * def.every, name)
      else
        skipped = skipped + 1
        emit(base, {event = 'bad_row', verb = 'tick', ['repeat'] = name, error = 'bad definition ' .. bad})
      end
    else
      redis.call('ZREM', base .. 'repeat', name)
    end
  end
end
return made
