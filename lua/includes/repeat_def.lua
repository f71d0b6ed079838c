-- a repeatable's definition (emq:{q}:repeat:defs, cjson), read the one way every
-- script that makes its jobs reads it.
--@include reads

-- the longest definition a script reads or writes (emq_notebook.repeat.DEF_BYTES, the
-- byte budget): a copy inside a script costs about 1.5 ms a MB and its cjson.decode as
-- much again, so a longer one (another node's) is never read: `register` writes none,
-- `tick` skips it with a `bad_row` event, `run_now` refuses it, a listing shows its size
local DEF_BYTES = 1048576

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
