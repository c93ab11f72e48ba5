--[[
  After a target's counter hash is rebuilt from PostgreSQL (field 'rb' = rebuild
  time, microseconds; field 'ep' = the new epoch), changes made before the
  rebuild may still be on their way to PostgreSQL. For a while the target
  remembers, per relation and user, the newest change Redis knows for them
  (KEYS[3], a hash of 'epoch:microseconds' per relation): a change made or
  replayed since the rebuild. A late
  change is replayed (replay-change.lua) only when it is newer than that, so
  nothing newer is undone and replays of concurrent batches cannot go backwards.

  A change that changes nothing in the window answered from the rebuilt state,
  which a late change of the user may contradict. It appends and announces
  nothing; the user's entry records the state answered as a confirmation
  ('epoch:microseconds:c' and the state). Redis then never replays an older
  change over it, and should a late change of the other state reach PostgreSQL,
  its replay appends the confirmed state as a change of its own, newer than
  the late one, so PostgreSQL ends in what the user was answered too.

  That hash stays under the bound on any key: once it holds touchedCapacity
  users, new users are not noted but the hash is marked full, and a late change
  of a user it does not know is then too late to replay (the caller rebuilds the
  target, which starts a new window).
]]
--@include hash-fields
--@include clock

local rebuildWindowMicros = 3600000000
local touchedCapacity = 9999
-- Not a user id, so it never collides with one.
local touchedFullField = 'full'

-- Whether a hash rebuilt at `rebuiltAt` (its 'rb' field, false when never) is in its window at `now` (microseconds).
local function rebuiltWithin(rebuiltAt, now)
  local at = tonumber(rebuiltAt or '0') or 0
  return at > 0 and now - at < rebuildWindowMicros
end

-- Whether the counter hash was rebuilt less than the window ago.
local function inRebuildWindow(counters)
  local rebuiltAt = redis.call('HGET', counters, rebuiltAtField)
  return rebuiltAt ~= false and rebuiltWithin(rebuiltAt, clockMicros())
end

local function noteChange(touched, user, epoch, micros)
  if redis.call('HEXISTS', touched, user) == 0 and redis.call('HLEN', touched) >= touchedCapacity then
    redis.call('HSET', touched, touchedFullField, '1')
  else
    redis.call('HSET', touched, user, epoch .. ':' .. micros)
  end
  redis.call('PEXPIRE', touched, math.floor(rebuildWindowMicros / 1000))
end

-- Notes a state answered by a change that changed nothing (see above), unless the
-- user has a note already: a change since the rebuild, which PostgreSQL will hold.
local function noteConfirmation(touched, user, epoch, micros, state)
  if redis.call('HEXISTS', touched, user) == 1 then
    return
  end
  if redis.call('HLEN', touched) >= touchedCapacity then
    redis.call('HSET', touched, touchedFullField, '1')
  else
    redis.call('HSET', touched, user, epoch .. ':' .. micros .. ':c' .. state)
  end
  redis.call('PEXPIRE', touched, math.floor(rebuildWindowMicros / 1000))
end

-- The newest change noted for the user as epoch, microseconds (0, 0 when none) and,
-- for a confirmation, the state confirmed ('1' or '0'; nil for a change); or nil
-- when the hash was full and may have missed the user's change.
local function notedChange(touched, user)
  local noted = redis.call('HGET', touched, user)
  if not noted then
    if redis.call('HEXISTS', touched, touchedFullField) == 1 then
      return nil
    end
    return 0, 0
  end
  local epoch, micros, confirmed = string.match(noted, '^(%d+):(%d+):c([01])$')
  if not epoch then
    epoch, micros = string.match(noted, '^(%d+):(%d+)$')
  end
  if not epoch then
    return 0, 0
  end
  return tonumber(epoch), tonumber(micros), confirmed
end


