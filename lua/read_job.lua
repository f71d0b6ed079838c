-- @read_job -- one job row's fields, each field's length read before its bytes; reads
-- only.
--@readonly
-- `get_job`'s read, and a frame's payload too large for @read_rows: a field another node
-- made 100 MB long is answered by its length (HSTRLEN), its bytes left on the server,
-- and a row of a million fields by its count, so a call reads about ARGV[3] bytes and at
-- most ARGV[2] fields, not the whole row. No command gives a field NAME's length, so a
-- row's names are listed (each copied) only when the row measures at most the call's
-- bytes (ARGV[3]) of names and values all told (measured.lua `row_within`). Any other
-- row, and every row on a server or for an ACL user without MEMORY USAGE (the embedded
-- fake), is read by the names the caller sends.
-- KEYS[1] = the queue base root
-- ARGV[1] = the job id; ARGV[2] = the most fields a row may hold to be listed (HKEYS);
--   ARGV[3] = bytes at most (read a call; and of a row listed, its names and values);
--   ARGV[4] = the longest field read whole (bytes); ARGV[5...] = the fields to read
--   (none: every field of the row)
-- returns -1 for a missing row (a foreign id, ids.lua `foreign_id`: the same);
-- EMQSTATE bad row type in <id> for a key of another type than a hash; else {the row's field count, name, value, name, value, ...}: the
-- fields named, in order, or with none named every field of a row of at most ARGV[2]
-- within ARGV[3] bytes (none of any other row). A value is the field's bytes; its
-- length (a number) when it is over ARGV[4] bytes, or once the call's names and values
-- reach ARGV[3] bytes (the first field within ARGV[4] is always read), for the caller
-- to ask by name; nil for a named field the row lacks.
--@include reads
local base, id = KEYS[1], ARGV[1]
local most, bytes, longest = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if foreign_id(id) then return -1 end
local row = base .. 'job:' .. id
local refused, count = row_refusal(row, id)
if refused then return refused end
local names = {}
if #ARGV > 4 then
  for i = 5, #ARGV do names[#names + 1] = ARGV[i] end
elseif count <= most and row_within(row, count, bytes) then
  names = redis.call('HKEYS', row)
end
local out, spent, read_one = {count}, 0, false
for _, name in ipairs(names) do
  local size, value = redis.call('HSTRLEN', row, name), nil
  spent = spent + #name
  if size <= longest and (not read_one or spent + size <= bytes) then
    value, read_one = redis.call('HGET', row, name), true
    if value then spent = spent + size end
  else
    value = size
  end
  out[#out + 1] = name
  out[#out + 1] = value or false
end
return out
