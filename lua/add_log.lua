-- @add_log -- append one line to the job's logs, trimmed to the last `keep`.
-- KEYS[1] = the row, KEYS[2] = the row's :logs list, KEYS[3] = the queue base root
-- ARGV[1] = line, ARGV[2] = keep ('' = all)
-- returns the list length; -1 for a missing row (no stray :logs list is made)
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local keep = tonumber(ARGV[2])
if ARGV[2] ~= '' and not (keep and keep >= 1 and keep == math.floor(keep)) then
  return redis.error_reply('ERR keep must be a whole number >= 1')
end
local n = redis.call('RPUSH', KEYS[2], ARGV[1])
if keep and n > keep then
  redis.call('LTRIM', KEYS[2], -keep, -1)
  n = keep
end
return n
