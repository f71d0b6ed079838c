-- @reprocess_dead_check -- the dry run of @reprocess_dead: one bounded step of the
-- same walk with the same rules, writing nothing.
--@readonly
-- KEYS[1] = dead, KEYS[2] = pending, KEYS[3] = the queue base root
-- ARGV as @reprocess_dead's
-- returns {score, member, more, moved, ghosts, bad, foreign, ids}, as @reprocess_dead
-- would answer on this state: the jobs it would move, the ghosts it would drop, the
-- bad rows and foreign ids it would leave in dead. Bounded as @reprocess_dead.
--@include reads
--@include walk
local dead, base = KEYS[1], KEYS[3]
local most = whole_of(ARGV[6]) or tonumber(ARGV[1])
local listed = ARGV[7] == '1'
local moved, ghosts, bad, foreign, ids = 0, 0, 0, {}, {}
local seen = {}
local head = walk(dead, ARGV, ARGV[5] ~= '' and ARGV[5] or '+inf', function(id)
  if foreign_id(id) then
    foreign[#foreign + 1] = reported_id(id)
    return foreign_cost(id)
  end
  local refused, _, _, bytes = read_member(base, id, seen)
  if refused == nil then
    moved = moved + 1
    if listed then ids[#ids + 1] = id end
  elseif refused == -1 then
    ghosts = ghosts + 1
  else
    bad = bad + 1
  end
  return id_cost(id) + bytes
end, function() return moved >= most end)
return {head[1], head[2], head[3], moved, ghosts, bad, foreign, ids}
