-- @repeat_add -- register (or replace) a repeatable: every `every_ms` it
-- produces a new job with the same payload.
-- KEYS[1] = the queue base root
-- ARGV = name, every_ms, payload, group ('' = flat), max_attempts
-- returns the first due time (ms); an error for a number that is not whole and >= 1,
-- and for a definition (the payload as JSON, with the rest) over DEF_BYTES, which no
-- tick would read (includes/repeat_def.lua); EMQSTATE bad row type (<type>) in <key>
-- when a registry key holds another type (`registry_misfit`); an error writes nothing.
-- A tick's report of the name's definition before, if any, is forgotten
--@include common
--@include repeat_def
local base = KEYS[1]
local every, attempts = whole_of(ARGV[2]), whole_of(ARGV[5])
if not every or every < 1 then return redis.error_reply('ERR every_ms must be a whole number >= 1') end
if not attempts or attempts < 1 then
  return redis.error_reply('ERR max_attempts must be a whole number >= 1')
end
if #ARGV[3] > DEF_BYTES then
  return redis.error_reply('ERR a repeatable\'s payload is at most ' .. DEF_BYTES .. ' bytes, not ' .. #ARGV[3])
end
local def = cjson.encode({every = every, payload = ARGV[3], group = ARGV[4], max_attempts = ARGV[5]})
if #def > DEF_BYTES then
  return redis.error_reply('ERR a repeatable\'s definition is at most ' .. DEF_BYTES .. ' bytes, not ' .. #def)
end
local misfit, held = registry_misfit(base)
if misfit then return bad_row('type (' .. held .. ')', misfit) end
-- every check has run: now the writes
local now = now_ms()
redis.call('HSETNX', base .. 'meta', 'created_at', tostring(now))
redis.call('HSET', base .. 'repeat:defs', ARGV[1], def)
redis.call('ZADD', base .. 'repeat', now + every, ARGV[1])
forget_reported(base, ARGV[1])
return now + every
