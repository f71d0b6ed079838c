-- the read-only fragments: whole numbers, a row's numeric fields, a lane's
-- counts, and the refusals they build. Nothing here writes or publishes, so a
-- `--@readonly` script (a dry run, a search) may include it; common and lanes
-- include it too, so every script reads a row the same way.

-- the largest whole number a Lua double and a Valkey integer both hold exactly
local MAX_WHOLE = 9007199254740991

-- a whole-number field as a row holds it: an optional minus, digits with no
-- leading zero, within MAX_WHOLE -- what HINCRBY, ZADD and tonumber all read the
-- same way. An absent field reads as `default`; anything else ('three', '',
-- '1e999', 'nan', ' 1') is nil: the caller refuses or skips, before any write.
local function whole_of(v, default)
  if not v then return default end
  if #v <= 17 and (v == '0' or string.find(v, '^%-?[1-9]%d*$')) then
    local n = tonumber(v)
    if n >= -MAX_WHOLE and n <= MAX_WHOLE then return n end
  end
  return nil
end

-- every whole-number field of a job row, with the value an absent one reads as
local ROW_WHOLES = {{'attempts', 0}, {'failures', 0}, {'stalled', 0}, {'max_attempts', 1},
  {'backoff', 1000}, {'priority', 0}}

-- the row's whole-number fields by name, or nil and the first field that holds
-- no whole number. Reads only.
local function row_wholes(jk)
  local names = {}
  for i, s in ipairs(ROW_WHOLES) do names[i] = s[1] end
  local vals = redis.call('HMGET', jk, unpack(names))
  local out = {}
  for i, s in ipairs(ROW_WHOLES) do
    local n = whole_of(vals[i], s[2])
    if n == nil then return nil, s[1] end
    out[s[1]] = n
  end
  return out
end

-- the refusal for a row (or a lane's meta) no transition can read: nothing written
local function bad_row(field, where)
  return redis.error_reply('EMQSTATE bad row ' .. field .. ' in ' .. where)
end

-- a lane's backlog and its bookkeeping (lanes.lua describes them)
local function lane_pending(base, g) return base .. 'g:' .. g .. ':pending' end
local function lane_meta(base, g) return base .. 'g:' .. g .. ':meta' end

-- the lane's limit and active count and its pause flag; nil and the field when
-- the meta holds no whole number there (written by hand or another node)
local function lane_counts(base, g)
  local m = redis.call('HMGET', lane_meta(base, g), 'limit', 'active', 'paused')
  local limit, active = whole_of(m[1], 1), whole_of(m[2], 0)
  if limit == nil then return nil, 'limit' end
  if active == nil then return nil, 'active' end
  return limit, active, m[3]
end

-- nil when the lane's meta is readable, else the refusal naming the bad field
local function lane_refusal(base, g)
  local ok, field = lane_counts(base, g)
  if ok == nil then return bad_row(field, 'lane ' .. g) end
  return nil
end
