-- a command over a long list of arguments, sent in slices Lua's unpack takes

-- the members (or pairs) one command names at most: even, so pairs are never split
local SLICE = 1000

-- `command key ...list` as one command a SLICE of `list` (nothing for an empty list)
local function in_slices(command, key, list)
  for s = 1, #list, SLICE do
    redis.call(command, key, unpack(list, s, math.min(s + SLICE - 1, #list)))
  end
end
