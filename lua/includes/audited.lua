-- the audit entry written beside a transition, in the same call (SPEC 12): the
-- toolkit's `audited3_<name>` runs the transition's own body unchanged, then appends
-- `XADD emq:audit:{q} MAXLEN ~ keep * verb .. outcome .. count .. ids .. args ..
-- who ..` with the outcome the body's reply says: both happen in one atomic call, so
-- the entry is there exactly when the transition ran, with what came of it.
--
-- The call carries one more KEY and one more ARGV, last, which the body never sees:
-- KEYS[n] = emq:audit:{q} (the queue's slot); ARGV[n] = the entry's values in one
-- argument, a MessagePack array (0xdc and its count in 2 bytes) of str 32 values (0xdb,
-- the length in 4 bytes big-endian, the bytes: byte-exact): verb, the count when done,
-- the ids field, the args field, keep, '1' when a -1 reply means gone ('' otherwise),
-- then the value of each identity field, in `emq_identity`'s order.
-- Composed ahead of this include from the toolkit's own tables, so each fact has one
-- home: `emq_refusals()` ({prefix, reason} pairs, longest prefix first: errors._EMQSTATE),
-- built only for an error reply, and `emq_identity(v)` (the identity's names, from
-- keyspace.AUDIT_WHO, each with its value v[7], v[8], ...).
-- Cost: the body's, plus one pass over the entry's values, one pcall and one XADD.

-- the outcome of a body that answered `reply` (ok: it returned; else it raised):
-- 'done', 'refused:<reason>' or 'error', and the error text when there was one
local function audit_outcome(ok, reply, gone)
  local text = nil
  if not ok then
    text = type(reply) == 'table' and reply.err or tostring(reply)
  elseif type(reply) == 'table' and reply.err then
    text = reply.err
  elseif gone and reply == -1 then
    return 'refused:gone', nil
  else
    return 'done', nil
  end
  if string.sub(text, 1, 8) ~= 'EMQSTATE' then return 'error', text end
  local rest = string.gsub(string.sub(text, 9), '^%s+', '')
  for _, pair in ipairs(emq_refusals()) do
    if string.sub(rest, 1, #pair[1]) == pair[1] then return 'refused:' .. pair[2], text end
  end
  return 'refused:refused', text
end

-- the entry's values from their one argument: read by the server's cmsgpack (C), or
-- where a server has none (fakeredis) here, the same bytes: past the array's 3-byte
-- head, each value a type byte, a 4-byte length, then its bytes
local function audit_values(packed)
  local msgpack = rawget(_G, 'cmsgpack')  -- a server without it: nil, never an error
  if msgpack then return msgpack.unpack(packed) end
  local byte, sub = string.byte, string.sub
  local values, at, size = {}, 4, #packed
  while at <= size do
    local a, b, c, d = byte(packed, at + 1, at + 4)
    local n = ((a * 256 + b) * 256 + c) * 256 + d
    values[#values + 1] = sub(packed, at + 5, at + 4 + n)
    at = at + 5 + n
  end
  return values
end

-- run `body(KEYS, ARGV)` and write its entry; answers {reply, entry} when the body
-- returned and the entry was written (the usual call: reply the body's, nil as false;
-- entry the stream id), else {kind, reply, entry, failure}: kind 'ok' (reply: the
-- body's) or 'err' (reply: the error's text), entry the stream id (false when not
-- written), failure why not (false when written)
local function emq_audited(body, KEYS, ARGV)
  local audit = KEYS[#KEYS]
  KEYS[#KEYS] = nil
  local v = audit_values(ARGV[#ARGV])
  ARGV[#ARGV] = nil
  local ok, reply = pcall(body, KEYS, ARGV)
  local outcome, text = audit_outcome(ok, reply, v[6] == '1')
  local count = v[2]
  if outcome ~= 'done' then count = (string.sub(outcome, 1, 8) == 'refused:') and '0' or '' end
  local entry = redis.pcall('XADD', audit, 'MAXLEN', '~', v[5], '*', 'verb', v[1], 'outcome', outcome,
    'count', count, 'ids', v[3], 'args', v[4], emq_identity(v))
  local failure = false
  if type(entry) == 'table' then
    failure, entry = entry.err or 'not written', false
  end
  if text then return {'err', text, entry, failure} end
  if reply == nil then reply = false end
  if entry then return {reply, entry} end
  return {'ok', reply, entry, failure}
end
