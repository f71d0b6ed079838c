-- the checks @complete and @fail share, every one before the first write
--@include lanes
--@include metrics

-- a worker finishing job `id` (row `jk`) with its claim's `token` (nil: an older
-- node's call, which names none): the row exists (-1), the job is in flight
-- (EMQSTATE not active), the claim owns it (EMQSTATE not owner; a row claimed with no
-- token has no owner, and any caller may finish it), every whole-number field and
-- its lane's meta read, the metrics retention reads. Answers the refusal, or nil,
-- the row's {group, dedup, owner, claimed_at}, its numbers and the retention.
local function finish_checks(jk, active, base, id, token)
  if redis.call('EXISTS', jk) == 0 then return -1 end
  if not redis.call('ZSCORE', active, id) then return redis.error_reply('EMQSTATE not active') end
  -- a row key of another type than a hash (another client's, written since the claim):
  -- a row no transition reads, refused typed (a raw WRONGTYPE stopped the Worker)
  local row = redis.pcall('HMGET', jk, 'group', 'dedup', 'owner', 'claimed_at')
  if row.err then return bad_row('type', id) end
  if token and row[3] and row[3] ~= '' and row[3] ~= token then
    return redis.error_reply('EMQSTATE not owner')
  end
  local nums, bad = row_wholes(jk)
  if not nums then return bad_row(bad, id) end
  if row[1] then
    -- measured, as the claims read it (a meta of another type: 'type')
    local ok, field = measured_lane_counts(base, row[1])
    if ok == nil then return bad_row(field, 'lane ' .. row[1]) end
  end
  local keep = metrics_keep(base)
  if not keep then return bad_row('metrics_keep', 'meta') end
  return nil, row, nums, keep
end
