-- shared fragments: the clock, events, row deletion, dedup release.
-- `base` is always the queue base root emq:{q}: ; every key derives from it.

-- the server clock in ms: one clock for every node sharing this Valkey
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- `s` as valid UTF-8: each byte outside a well-formed sequence becomes the four
-- characters \xNN (as decoding.printable shows it). A row keeps its bytes as
-- written; an event is JSON text every reader takes (a strict cjson refuses
-- other bytes, and would do so after the script's writes).
-- One gsub does it, in C: each byte of 128 or more with the continuation bytes after
-- it (three at most) is a token, looked up in a table that holds, for each token met
-- before in this call, false (a character: kept) or its repair (utf8_repaired), not a
-- Lua loop over every byte.
local function utf8_repaired(token)
  local b = string.byte(token, 1)
  local len, lo, hi = 0, 0x80, 0xBF
  if b >= 0xC2 and b <= 0xDF then len = 2
  elseif b >= 0xE0 and b <= 0xEF then
    len = 3
    if b == 0xE0 then lo = 0xA0 elseif b == 0xED then hi = 0x9F end
  elseif b >= 0xF0 and b <= 0xF4 then
    len = 4
    if b == 0xF0 then lo = 0x90 elseif b == 0xF4 then hi = 0x8F end
  end
  -- the bytes after the first are continuation bytes (the token's pattern): the
  -- second's range and the length decide
  local second = string.byte(token, 2)
  local keep = 0
  if len > 0 and #token >= len and second >= lo and second <= hi then keep = len end
  if keep == #token then return false end
  local out = {string.sub(token, 1, keep)}
  for i = keep + 1, #token do out[#out + 1] = string.format('\\x%02x', string.byte(token, i)) end
  return table.concat(out)
end

local function utf8_text(s)
  if not string.find(s, '[\128-\255]') then return s end
  local met = setmetatable({}, {__index = function(t, token)
    local repaired = utf8_repaired(token)
    t[token] = repaired
    return repaired
  end})
  return (string.gsub(s, '[\128-\255][\128-\191]?[\128-\191]?[\128-\191]?', met))
end

-- one cjson object per lifecycle event; the name rides the `event` field.
-- Text values go out as valid UTF-8 (utf8_text), so publishing never fails.
local function emit(base, ev)
  for k, v in pairs(ev) do
    if type(v) == 'string' then ev[k] = utf8_text(v) end
  end
  redis.call('PUBLISH', base .. 'events', cjson.encode(ev))
end

-- the last queue base emit_job named and its events channel: a bulk call publishes
-- on one channel once per job, and a comparison costs less than building the name
local events_base, events_channel = nil, nil

-- a job's lifecycle event {event, job} (and its `group`, when given), as emit
-- publishes it; written out directly when no value needs escaping (the common case,
-- where cjson would cost more than the PUBLISH itself). An id of ASCII letters, digits
-- and `_:.-` is settled by one scan whose first range matches most bytes; any other
-- value is checked for the bytes JSON escapes.
local function emit_job(base, event, id, group)
  if (string.find(id, '[^a-zA-Z0-9_:.-]') and string.find(id, '[%c"\\\128-\255]'))
      or (group and string.find(group, '[%c"\\\128-\255]')) then
    return emit(base, {event = event, job = id, group = group})
  end
  if base ~= events_base then events_base, events_channel = base, base .. 'events' end
  local text = '{"event":"' .. event .. '","job":"' .. id .. '"}'
  if group then text = '{"event":"' .. event .. '","job":"' .. id .. '","group":"' .. group .. '"}' end
  redis.call('PUBLISH', events_channel, text)
end

-- a job's row, its logs and its lock. UNLINK has DEL's effect on the keyspace and
-- frees a value of many parts (a :logs list of a million lines) off the script's
-- thread, whatever the server's lazyfree settings; one large field (a 100 MB payload)
-- is still freed here, so the bulk deletes charge it to their byte budget
local function del_job(base, id)
  local jk = base .. 'job:' .. id
  redis.call('UNLINK', jk, jk .. ':logs', jk .. ':lock')
end

-- give back a dedup key, but only while it still points at this job
local function release_dedup(base, key, id)
  if key and key ~= '' and redis.call('HGET', base .. 'dedup', key) == id then
    redis.call('HDEL', base .. 'dedup', key)
  end
end

--@include reads

-- a bulk verb skips a bad row, leaves it where it is, and says so on the events channel
local function skipped_bad_row(base, verb, id, reply)
  emit(base, {event = 'bad_row', verb = verb, job = id, error = reply.err})
end
