-- @repeat_tick -- every due repeatable produces one job and moves its next due
-- time past now (missed beats are skipped, not replayed).
-- KEYS[1] = the queue base root ; ARGV = fresh job ids, one per job it may make
-- returns the ids of the jobs produced. A definition that does not decode, or
-- whose every / max_attempts is not a whole number >= 1, or whose payload or
-- group is not text, is skipped and left as it is, with a `bad_row` event.
--@include common
--@include lanes
--@include enqueue_row
local base = KEYS[1]
local now = now_ms()

-- the definition as a table, or nil and the field that is wrong; reads only
local function readable(raw)
  local ok, def = pcall(cjson.decode, raw)
  if not ok or type(def) ~= 'table' then return nil, 'definition' end
  if type(def.every) ~= 'number' or def.every < 1 or def.every > MAX_WHOLE
    or def.every ~= math.floor(def.every) then return nil, 'every' end
  if type(def.payload) ~= 'string' then return nil, 'payload' end
  if def.group ~= nil and type(def.group) ~= 'string' then return nil, 'group' end
  local attempts = def.max_attempts or '1'
  if type(attempts) == 'number' then attempts = string.format('%.0f', attempts) end
  local n = type(attempts) == 'string' and whole_of(attempts)
  if not n or n < 1 then return nil, 'max_attempts' end
  def.max_attempts = attempts
  return def
end

local made, skipped = {}, 0
while #made < #ARGV do
  local due = redis.call('ZRANGEBYSCORE', base .. 'repeat', '-inf', now, 'WITHSCORES',
    'LIMIT', skipped, #ARGV - #made)
  if #due == 0 then break end
  for i = 1, #due, 2 do
    local name, at = due[i], tonumber(due[i + 1])
    local raw = redis.call('HGET', base .. 'repeat:defs', name)
    if raw then
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
