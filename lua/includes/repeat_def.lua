-- a repeatable's definition (emq:{q}:repeat:defs, cjson), read the one way every
-- script that makes its jobs reads it.
--@include reads

-- the longest definition a script reads or writes (emq_notebook.repeat.DEF_BYTES, the
-- byte budget): a copy inside a script costs about 1.5 ms a MB and its cjson.decode as
-- much again, so a longer one (another node's) is never read: `register` writes none,
-- `tick` skips it with a `bad_row` event, `run_now` refuses it, a listing shows its size
local DEF_BYTES = 1048576

-- the due names one tick examines at most (emq_notebook.repeat.TICK_NAMES holds the
-- same number), whatever becomes of them: each costs an HSTRLEN, an HGET and a decode,
-- a bad one an event. Bounded by bytes read alone, a tick over 20,000 due definitions
-- that are not JSON held Valkey 142 ms, over 100,000 names with no definition 376 ms;
-- 500 names a call held it 4.3 ms (1,000: 10.8 ms), bench/repeat_tick.py
local TICK_NAMES = 500
-- the members one ZADD or ZREM of a tick names at most (well under the stack's unpack)
local WRITE_CHUNK = 500
-- the `bad_row` events one tick emits at most (emq_notebook.repeat.TICK_REPORTS holds the
-- same number): the first 501 bad definitions another node wrote made each tick emit 500
-- events, which flushed what a reader of the events channel keeps; the rest wait for
-- the calls after
local TICK_REPORTS = 20

-- what a tick has reported of each bad definition it met (`repeat:reported`, a hash:
-- name -> the report's fingerprint, `repeat_tick`), so a definition is reported once
-- while it stays as it is. A name leaves it when a tick makes its job or takes it out,
-- and when `register` or `unregister` names it; a key of another type there (written
-- by hand) is never read or written: each tick then reports what it meets
local function reported_key(base) return base .. 'repeat:reported' end
local function forget_reported(base, name) redis.pcall('HDEL', reported_key(base), name) end

-- the first registry key holding another type than its own (another node's, or one
-- written by hand): its name and the type it holds; nil when each is of its type or
-- absent. No script reads or writes a registry that answers it.
local function registry_misfit(base)
  for _, key in ipairs({{'repeat', 'zset'}, {'repeat:defs', 'hash'}}) do
    local held = redis.call('TYPE', base .. key[1])
    held = type(held) == 'table' and held.ok or held
    if held ~= key[2] and held ~= 'none' then return base .. key[1], held end
  end
  return nil
end

-- repeatable `name`'s definition: its text (nil when there is none) and its length in
-- bytes; a definition over DEF_BYTES is not read (nil and its length)
local function definition(base, name)
  local size = redis.call('HSTRLEN', base .. 'repeat:defs', name)
  if size > DEF_BYTES then return nil, size end
  return redis.call('HGET', base .. 'repeat:defs', name), size
end

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
