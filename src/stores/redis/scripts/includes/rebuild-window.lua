--[[
  After a target's counter hash is rebuilt from PostgreSQL (field 'rb' = rebuild
  time, microseconds; field 'ep' = the new epoch), changes made before the
  rebuild may still be on their way to PostgreSQL. For a while the target
  remembers, per user, the newest change Redis knows for them (KEYS[3], a hash
  of 'epoch:microseconds'): a change made or replayed since the rebuild. A late
  change is replayed (replay-change.lua) only when it is newer than that, so
  nothing newer is undone and replays of concurrent batches cannot go backwards.
]]
--@include hash-fields

local rebuildWindowMicros = 3600000000

local function nowMicros()
  local now = redis.call('TIME')
  return tonumber(now[1]) * 1000000 + tonumber(now[2])
end

-- Whether the counter hash was rebuilt less than the window ago.
local function inRebuildWindow(counters)
  local rebuiltAt = tonumber(redis.call('HGET', counters, rebuiltAtField) or '0')
  return rebuiltAt > 0 and nowMicros() - rebuiltAt < rebuildWindowMicros
end

local function noteChange(touched, user, epoch, micros)
  redis.call('HSET', touched, user, epoch .. ':' .. micros)
  redis.call('PEXPIRE', touched, math.floor(rebuildWindowMicros / 1000))
end

-- The newest change noted for the user as epoch, microseconds (0, 0 when none).
local function notedChange(touched, user)
  local noted = redis.call('HGET', touched, user)
  if not noted then
    return 0, 0
  end
  local epoch, micros = string.match(noted, '^(%d+):(%d+)$')
  if not epoch then
    return 0, 0
  end
  return tonumber(epoch), tonumber(micros)
end

local function markTouched(counters, touched, user, epoch, micros)
  if inRebuildWindow(counters) then
    noteChange(touched, user, epoch, micros)
  end
end
