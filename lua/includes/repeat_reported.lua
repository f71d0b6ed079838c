-- what the tick has reported of the bad definitions it met, kept so that each is
-- reported once while it stays as it is; writes, so no `--@readonly` script includes it.

-- the `bad_row` events one tick emits at most (emq_notebook.repeat.TICK_REPORTS holds the
-- same number): the first 501 bad definitions another node wrote made each tick emit 500
-- events, which flushed what a reader of the events channel keeps; the rest wait for
-- the calls after
local TICK_REPORTS = 20

-- what a tick has reported of each bad definition it met (`repeat:reported`, a hash:
-- name -> the report's fingerprint, `repeat_tick`), so a definition is reported once
-- while it stays as it is. A name leaves it when a tick makes its job or takes it out,
-- and when `register` or `unregister` names it; a key of another type there (written
-- by hand) is never read or written: each tick then reports what it meets
local function reported_key(base) return base .. 'repeat:reported' end
local function forget_reported(base, name) redis.pcall('HDEL', reported_key(base), name) end
