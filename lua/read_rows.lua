-- @read_rows -- the fields a frame shows, for a batch of jobs; reads only.
--@readonly
-- One call per batch (bounded by the caller's batch size) instead of one
-- command per job, so a 100,000-job snapshot is a hundred calls.
-- KEYS[1] = the queue base root
-- ARGV[1] = n, the number of fields; ARGV[2 .. n+1] = the fields; then the job ids
-- returns one list of n values per id, in the order asked (nil where absent)
local base, n = KEYS[1], tonumber(ARGV[1])
local fields = {unpack(ARGV, 2, n + 1)}
local out = {}
for i = n + 2, #ARGV do
  out[#out + 1] = redis.call('HMGET', base .. 'job:' .. ARGV[i], unpack(fields))
end
return out
