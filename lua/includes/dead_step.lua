-- One bounded step of the walk over dead that @reprocess_dead and its dry run share:
-- the same members examined, each found moved, a ghost, a bad row or a foreign id by
-- the same rules (reads.lua `read_member`, ids.lua `foreign_id`). `act` is told each:
-- act.move(id, group, job key), act.ghost(id), act.bad(id, refused), act.foreign(id);
-- the dry run passes none. Answers {score, member, more, moved, ghosts, bad, foreign,
-- ids} and the rank the step started at. Reads only (the acts may write).
--@include reads
--@include walk

local function dead_step(dead, base, argv, act)
  local most = whole_of(argv[6]) or tonumber(argv[1])
  local listed = argv[7] == '1'
  local moved, ghosts, bad, foreign, ids, seen = 0, 0, 0, {}, {}, {}
  local head, start = walk(dead, argv, argv[5] ~= '' and argv[5] or '+inf', function(id)
    if foreign_id(id) then
      foreign[#foreign + 1] = reported_id(id)
      if act then act.foreign(id) end
      return foreign_cost(id)
    end
    local refused, g, _, bytes, jk = read_member(base, id, seen)
    if refused == nil then
      moved = moved + 1
      if listed then ids[#ids + 1] = id end
      if act then act.move(id, g, jk) end
    elseif refused == -1 then
      ghosts = ghosts + 1
      if act then act.ghost(id) end
    else
      bad = bad + 1
      if act then act.bad(id, refused) end
    end
    return id_cost(id) + bytes
  end, function() return moved >= most end)
  return {head[1], head[2], head[3], moved, ghosts, bad, foreign, ids}, start
end
