-- what the tick has reported of the bad definitions it met (`repeat:reported`, a hash:
-- name -> the report's fingerprint), so each is reported once while it stays as it is.
-- A name leaves it when a tick makes its job or takes it out, and when `register` or
-- `unregister` names it; a key of another type there (written by hand) is never read or
-- written: each tick then reports what it meets. Writes: no `--@readonly` script includes it.

-- the `bad_row` events one tick emits at most (emq_notebook.repeat.TICK_REPORTS); the
-- rest wait for the calls after
local TICK_REPORTS = 20

local function reported_key(base) return base .. 'repeat:reported' end
local function forget_reported(base, name) redis.pcall('HDEL', reported_key(base), name) end

-- whether `name`'s report in hash `key` is `as` already: its length asked first
-- (HSTRLEN), so a report another node made long is never copied
local function reported_as(key, name, as)
  return redis.call('HSTRLEN', key, name) == #as and redis.call('HGET', key, name) == as
end
