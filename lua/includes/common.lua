-- shared fragments: the clock, events, row deletion, dedup release.
-- `base` is always the queue base root emq:{q}: ; every key derives from it.

-- the server clock in ms: one clock for every node sharing this Valkey
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- one cjson object per lifecycle event; the name rides the `event` field
local function emit(base, ev)
  redis.call('PUBLISH', base .. 'events', cjson.encode(ev))
end

-- a job's row, its logs and its lock
local function del_job(base, id)
  local jk = base .. 'job:' .. id
  redis.call('DEL', jk, jk .. ':logs', jk .. ':lock')
end

-- give back a dedup key, but only while it still points at this job
local function release_dedup(base, key, id)
  if key and key ~= '' and redis.call('HGET', base .. 'dedup', key) == id then
    redis.call('HDEL', base .. 'dedup', key)
  end
end

-- the largest whole number a Lua double and a Valkey integer both hold exactly
local MAX_WHOLE = 9007199254740991

-- a whole-number field as a row holds it: an optional minus, digits with no
-- leading zero, within MAX_WHOLE -- what HINCRBY, ZADD and tonumber all read the
-- same way. An absent field reads as `default`; anything else ('three', '',
-- '1e999', 'nan', ' 1') is nil: the caller refuses or skips, before any write.
local function whole_of(v, default)
  if not v then return default end
  if #v <= 17 and (v == '0' or string.find(v, '^%-?[1-9]%d*$')) then
    local n = tonumber(v)
    if n >= -MAX_WHOLE and n <= MAX_WHOLE then return n end
  end
  return nil
end

-- every whole-number field of a job row, with the value an absent one reads as
local ROW_WHOLES = {{'attempts', 0}, {'failures', 0}, {'stalled', 0}, {'max_attempts', 1},
  {'backoff', 1000}, {'priority', 0}}

-- the row's whole-number fields by name, or nil and the first field that holds
-- no whole number. Reads only.
local function row_wholes(jk)
  local names = {}
  for i, s in ipairs(ROW_WHOLES) do names[i] = s[1] end
  local vals = redis.call('HMGET', jk, unpack(names))
  local out = {}
  for i, s in ipairs(ROW_WHOLES) do
    local n = whole_of(vals[i], s[2])
    if n == nil then return nil, s[1] end
    out[s[1]] = n
  end
  return out
end

-- the refusal for a row (or a lane's meta) no transition can read: nothing written
local function bad_row(field, where)
  return redis.error_reply('EMQSTATE bad row ' .. field .. ' in ' .. where)
end

-- a bulk verb skips a bad row, leaves it where it is, and says so on the events channel
local function skipped_bad_row(base, verb, id, reply)
  emit(base, {event = 'bad_row', verb = verb, job = id, error = reply.err})
end
