-- the due-member loop @promote and @expire share (includes/walk.lua walks the set)
--@include common
--@include walk
--@include slices

-- each member of `set` due by now (from the place in argv, where the previous call
-- ended) that may move is handed to move(id, group, priority, row key) and counted;
-- a ghost leaves the set; a bad row (or its lane's meta) or a foreign id stays where
-- it is, announced once as a `bad_row` event of `verb`. Answers {moved, score, member, more}.
local function due_moves(set, base, verb, argv, move)
  local moved, seen, ghosts = 0, {}, {}
  local head = walk(set, argv, string.format('%.0f', now_ms()), function(id)
    if foreign_id(id) then
      skipped_bad_row(base, verb, reported_id(id), {err = 'foreign id'})
      return foreign_cost(id)
    end
    local refused, g, priority, bytes, jk = read_member(base, id, seen)
    if refused == -1 then
      ghosts[#ghosts + 1] = id
    elseif refused then
      skipped_bad_row(base, verb, id, refused)
    else
      move(id, g, priority, jk)
      moved = moved + 1
    end
    return id_cost(id) + bytes
  end)
  -- the ghosts leave after the walk, which reads on by rank
  in_slices('ZREM', set, ghosts)
  return {moved, head[1], head[2], head[3]}
end
