-- @get_logs -- one page of the job's log lines, in append order: bounded by lines
-- and bytes, so a list of a million lines is read in calls that each hold the server
-- briefly.
--@readonly
-- KEYS[1] = the row, KEYS[2] = the row's :logs list, KEYS[3] = the queue base root
-- ARGV[1] = the first line's index (from 0; a negative one counts from the end, as
-- LRANGE does; none: the list's first page in the old reply), ARGV[2] = lines at
-- most, ARGV[3] = bytes at most (the page ends after the line that reaches them)
-- returns {length, first, line...}: the list's length, the index of the page's first
-- line and the page's lines; with no ARGV, the lines alone (the whole list when it
-- fits a page of PAGE_LINES lines and PAGE_BYTES bytes, else its first page); -1 for
-- a missing row; EMQSTATE bad row type in <id> (or in logs <id>) for a row (or a :logs
-- key) of another type (another client's)
--@include reads
local row, logs = KEYS[1], KEYS[2]
-- the id, as the row's key holds it after the base and 'job:' (a refusal names it)
local id = string.sub(row, #KEYS[3] + 5)
local refused = row_refusal(row, id) or logs_refusal(logs, id)
if refused then return refused end
-- the page a call takes when none is asked: LRANGE in a script copies each line
local PAGE_LINES, PAGE_BYTES = 5000, 1048576
-- lines read at once, so a page of long lines stops soon after its bytes
local CHUNK = 100
local paged = ARGV[1] ~= nil
local length = redis.call('LLEN', logs)
local first = paged and tonumber(ARGV[1]) or 0
if first < 0 then first = math.max(0, length + first) end
local most = paged and tonumber(ARGV[2]) or PAGE_LINES
local bytes = paged and tonumber(ARGV[3]) or PAGE_BYTES
local out, spent = paged and {length, first} or {}, 0
local at, stop = first, math.min(length, first + most) - 1
while at <= stop and spent < bytes do
  local lines = redis.call('LRANGE', logs, at, math.min(stop, at + CHUNK - 1))
  if #lines == 0 then break end
  for k = 1, #lines do
    out[#out + 1] = lines[k]
    spent = spent + #lines[k]
    if spent >= bytes then break end
  end
  at = at + CHUNK
end
return out
