-- @repeat_add -- register (or replace) a repeatable: every `every` ms it produces a new
-- job with the same payload.
-- KEYS[1] = the queue base root
-- ARGV = name, definition (JSON text: every, payload, group ('' = flat), max_attempts,
--   stored as sent; repeat.register writes it)
-- returns the first due time (ms); EMQSTATE too long definition <n> bytes, at most
--   <DEF_BYTES>; ERR for a definition `readable` refuses (includes/repeat_def.lua; no
--   caller of the toolkit sends one); EMQSTATE bad row type (<type>) in <key> when a
--   registry key holds another type. A refusal writes nothing; a tick's report of the
--   name's definition before is forgotten.
--@include common
--@include repeat_def
--@include repeat_reported
local base, name, text = KEYS[1], ARGV[1], ARGV[2]
if #text > DEF_BYTES then
  return redis.error_reply('EMQSTATE too long definition ' .. #text .. ' bytes, at most ' .. DEF_BYTES)
end
-- the definition as every tick and run-now reads it
local def, bad = readable(text)
if not def then return redis.error_reply('ERR a definition no tick reads (bad ' .. bad .. ')') end
local misfit, held = registry_misfit(base)
if misfit then return bad_row('type (' .. held .. ')', misfit) end
-- every check has run: now the writes
local now = now_ms()
redis.call('HSETNX', base .. 'meta', 'created_at', tostring(now))
redis.call('HSET', base .. 'repeat:defs', name, text)
redis.call('ZADD', base .. 'repeat', now + def.every, name)
forget_reported(base, name)
return now + def.every
