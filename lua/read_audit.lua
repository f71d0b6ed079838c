-- @read_audit -- a page of a queue's audit stream, newest first, an entry at a time within a byte budget; reads only.
--@readonly
-- KEYS[1] = the audit stream (emq:audit:{q}); KEYS[2] = the queue base root (unread: the
--   convention, and the same slot)
-- ARGV[1] = the highest id read ('+', or '(' and an id: below it); ARGV[2] = the lowest
--   ('-', or an id); ARGV[3] = entries at most; ARGV[4] = bytes at most
-- returns {entry, ...} newest first, each {id, {name, value, ...}} as XREVRANGE answers
--   it: ARGV[3] of them, or fewer where the range ends or once their bytes (ids, names
--   and values) reach ARGV[4] (one at least); an error reply for a key that is no
--   stream. One XREVRANGE COUNT 1 an entry, so a page copies about ARGV[4] bytes and one
--   entry more, whatever another node's entries hold.
local key, high, low = KEYS[1], ARGV[1], ARGV[2]
local most, bytes = tonumber(ARGV[3]), tonumber(ARGV[4])
local out, spent = {}, 0
while #out < most and spent < bytes do
  local got = redis.pcall('XREVRANGE', key, high, low, 'COUNT', 1)
  if got.err then return redis.error_reply(got.err) end
  local entry = got[1]
  if not entry then break end
  out[#out + 1] = entry
  spent = spent + #entry[1]
  for _, v in ipairs(entry[2]) do spent = spent + #v end
  high = '(' .. entry[1]
end
return out
