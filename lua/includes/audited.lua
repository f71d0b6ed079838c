-- the audit entry written beside a transition, in the same call (SPEC 12): the
-- toolkit's `audited4_<name>` runs the transition's own body unchanged, then
-- `XADD emq:audit:{q} MAXLEN ~ keep * verb .. outcome .. count .. ids .. args .. who ..`
-- with the outcome the body's reply says, both in one atomic call.
-- KEYS: the transition's, then emq:audit:{q} (the queue's slot), last.
-- ARGV: the transition's, then AUDIT_VALUES plain values, last: verb, the count when
--   done, the ids field, the args field, keep, '1' when a -1 reply means gone ('' if
--   not), then each identity value in `emq_identity`'s order. The body sees neither.
-- Composed ahead of this include from the toolkit's own tables (one home each):
-- AUDIT_VALUES, `emq_refusals()` ({prefix, reason}, longest first: errors._EMQSTATE)
-- and `emq_identity(v)` (keyspace.AUDIT_WHO's names, each with its value v[7], ...).

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

-- run `body(KEYS, ARGV)` and write its entry; answers {reply, entry} when the body
-- returned and the entry was written (reply nil as false; entry the stream id), else
-- {kind, reply, entry, failure}: kind 'ok' (reply: the body's) or 'err' (reply: the
-- error's text), entry the stream id (false when not written), failure why not
local function emq_audited(body, KEYS, ARGV)
  local audit = KEYS[#KEYS]
  KEYS[#KEYS] = nil
  local first = #ARGV - AUDIT_VALUES + 1
  local v = {unpack(ARGV, first)}
  for i = #ARGV, first, -1 do ARGV[i] = nil end
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
