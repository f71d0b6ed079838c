-- @add_log -- append one line to the job's logs, trimmed to the last `keep`.
-- KEYS[1] = the row, KEYS[2] = the row's :logs list, KEYS[3] = the queue base root
-- ARGV[1] = line, ARGV[2] = keep ('' = all)
-- returns the list length; -1 for a missing row (no stray :logs list is made);
-- EMQSTATE bad row type in <id> (or in logs <id>) for a row (or a :logs key) of another
-- type (another client's) -- nothing written
--@include reads
-- the id, as the row's key holds it after the base and 'job:' (a refusal names it)
local id = string.sub(KEYS[1], #KEYS[3] + 5)
local refused = row_refusal(KEYS[1], id)
if refused then return refused end
local keep = tonumber(ARGV[2])
if ARGV[2] ~= '' and not (keep and keep >= 1 and keep == math.floor(keep)) then
  return redis.error_reply('ERR keep must be a whole number >= 1')
end
refused = logs_refusal(KEYS[2], id)
if refused then return refused end
local n = redis.call('RPUSH', KEYS[2], ARGV[1])
if keep and n > keep then
  redis.call('LTRIM', KEYS[2], -keep, -1)
  n = keep
end
return n
