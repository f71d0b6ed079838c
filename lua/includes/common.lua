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

--@include reads

-- a bulk verb skips a bad row, leaves it where it is, and says so on the events channel
local function skipped_bad_row(base, verb, id, reply)
  emit(base, {event = 'bad_row', verb = verb, job = id, error = reply.err})
end
