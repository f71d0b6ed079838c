-- ids as a script meets them: foreign ones (never addressed), what one costs a bulk
-- call, and how a reply or an event reports a long one. Reads only.
--@include constants

-- an id as a reply, a refusal or an event reports it: a long one's first 200 bytes
-- and its length, so a report never copies a megabyte id again. The head ends before
-- a character's continuation bytes (0x80-0xBF, three at most), so a UTF-8 id reads as
-- whole characters; an id of other bytes is cut at 200.
local function reported_id(id)
  if #id <= 256 then return id end
  local cut, byte = 200, string.byte
  while cut > 197 and byte(id, cut + 1) >= 128 and byte(id, cut + 1) < 192 do cut = cut - 1 end
  return string.sub(id, 1, cut) .. '... (' .. #id .. ' bytes)'
end

-- an id another node wrote that names another job's subkey (`x:logs`, `x:lock`): its
-- row key would be job x's logs list or lock, so no script addresses it as a job; a
-- bulk verb leaves it where it is and reports it (keyspace.check_server_id holds the
-- same rule). An id longer than MAX_ID bytes is foreign too: a script hashes and
-- copies an id at each key and member it names. Any other id is addressed as it is.
local function foreign_id(id)
  if #id > MAX_ID then return true end
  -- the byte first: a bulk verb asks this of every member
  if #id < 5 or string.byte(id, -5) ~= 58 then return false end
  local tail = string.sub(id, -4)
  return tail == 'logs' or tail == 'lock'
end

-- what a bulk call counts for an id against its byte budget: it hashes, copies and
-- compares the id at each key and member it names (the row, the sets, the event)
local function id_cost(id) return #id * ID_WORK end

-- what it counts for a foreign id: its bytes once, as it reads them (it builds no key
-- of it and reports it clipped)
local function foreign_cost(id) return #id end

-- true for a lane no key is built of: a name over MAX_ID bytes, which only another node
-- writes (the toolkit's name gate refuses it)
local function foreign_lane(g) return #g > MAX_ID end
