-- @read_monitor -- what a scrape reads of a queue beside its health: the throughput and latency of the minutes asked, and when the oldest dead job died; reads only.
--@readonly
-- KEYS[1] = the queue base root
-- ARGV[1] = the first minute; ARGV[2] = the last minute (at most MONITOR_MINUTES
--   after the first); ARGV[3] = '1' to read only what was measured first (a server), ''
--   where nothing can be measured (the embedded fake: no MEMORY command); ARGV[4] = the
--   most fields of a latency hash read; ARGV[5] = the most bytes of a latency hash or
--   of the dead set's head read
-- returns {oldest, completed, failed, wait, run}: oldest when the oldest dead job died
--   (the dead set's lowest score, whole ms), nil when none, past 2^53 or of another
--   type; completed and failed the count of each minute asked, in order (0 where none, -1
--   where the field holds no whole count or the key is no hash); wait and run {minute,
--   buckets, ...} for each minute asked that the latency index holds, buckets {bucket,
--   count, ...} as the hash holds them, or -1 for a hash not read (over ARGV[4] fields or
--   ARGV[5] bytes, or no hash). Nothing is copied unmeasured (includes/monitor_minutes.lua).
--@include monitor_minutes
local got = monitor_minutes(KEYS[1], whole_of(ARGV[1]), whole_of(ARGV[2]), ARGV[3] == '1', tonumber(ARGV[4]),
  tonumber(ARGV[5]))
if not got then
  return redis.error_reply('ERR read_monitor: minutes ' .. tostring(ARGV[1]) .. ' to ' .. tostring(ARGV[2]))
end
return got
