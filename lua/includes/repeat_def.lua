-- a repeatable's definition (emq:{q}:repeat:defs, cjson), read the one way every
-- script that makes its jobs reads it.
--@include reads
--@include repeat_shape

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

-- the longest definition a script reads or writes (emq_notebook.repeat.DEF_BYTES, the
-- byte budget): a longer one (another node's) is never read: `register` writes none,
-- `tick` skips it with a `bad_row` event, `run_now` refuses it, a listing shows its size
local DEF_BYTES = 1048576

-- repeatable `name`'s definition: its text (nil when there is none) and its length in
-- bytes; a definition over DEF_BYTES is not read (nil and its length)
local function definition(base, name)
  local size = redis.call('HSTRLEN', base .. 'repeat:defs', name)
  if size > DEF_BYTES then return nil, size end
  return redis.call('HGET', base .. 'repeat:defs', name), size
end

-- a definition over SHAPED_FROM bytes is read first as `shaped`; one of another shape
-- is decoded whole when it is at most WHOLE_BYTES, else not read (`shape`)
local SHAPED_FROM = 1024
local WHOLE_BYTES = 65536
-- what a whole decode counts against a call's byte budget, a byte of the definition:
-- its worst case (values of 3 bytes, `{},`) costs about 15 times a byte of payload
-- text, so one of WHOLE_BYTES takes a tick's DEF_BYTES
local DECODE_WORK = 16

-- the definition as a table, or nil and the field that is wrong (`definition`: not a
-- JSON object; `shape`: over WHOLE_BYTES and not `shaped`), and the bytes its reading
-- counts against a call's budget (a whole decode DECODE_WORK a byte). The one rule of a
-- readable definition: a tick, run-now and register read it so, and a listing
-- (`read_repeats`) answers its word. Reads only
local function readable(raw)
  local def = #raw > SHAPED_FROM and shaped(raw)
  local work = #raw
  if not def then
    if #raw > WHOLE_BYTES then return nil, 'shape', work end
    local ok
    ok, def = pcall(cjson.decode, raw)
    work = #raw * DECODE_WORK
    -- a JSON list decodes to a table too
    if not ok or type(def) ~= 'table' or def[1] ~= nil then return nil, 'definition', work end
  end
  if type(def.every) ~= 'number' or def.every < 1 or def.every > MAX_WHOLE
    or def.every ~= math.floor(def.every) then return nil, 'every', work end
  if type(def.payload) ~= 'string' then return nil, 'payload', work end
  if def.group ~= nil and type(def.group) ~= 'string' then return nil, 'group', work end
  local attempts = def.max_attempts or '1'
  if type(attempts) == 'number' then attempts = string.format('%.0f', attempts) end
  local n = type(attempts) == 'string' and whole_of(attempts)
  if not n or n < 1 then return nil, 'max_attempts', work end
  def.max_attempts = attempts
  return def, nil, work
end
