-- @get_logs -- the job's log lines in append order.
--@readonly
-- KEYS[1] = the row, KEYS[2] = the row's :logs list, KEYS[3] = the queue base root
-- returns the lines ({} when none); -1 for a missing row
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
return redis.call('LRANGE', KEYS[2], 0, -1)
