--[[
  After a target's counter hash is rebuilt from PostgreSQL (field 'rb' = rebuild
  time, microseconds), changes made before the rebuild may still be on their way
  to PostgreSQL. For a while the target remembers, per user, the version of the
  newest change Redis knows for them (KEYS[3], a hash): a change made or
  replayed since the rebuild. A late change is replayed (replay-change.lua) only
  when it is newer than that, so nothing newer is undone and replays of
  concurrent batches cannot go backwards.
]]
--@include hash-fields

local rebuildWindowMicros = 3600000000

local function nowMicros()
  local now = redis.call('TIME')
  return tonumber(now[1]) * 1000000 + tonumber(now[2])
end

-- Whether the counter hash was rebuilt less than the window ago; returns the rebuild time too.
local function inRebuildWindow(counters)
  local rebuiltAt = tonumber(redis.call('HGET', counters, rebuiltAtField) or '0')
  return rebuiltAt > 0 and nowMicros() - rebuiltAt < rebuildWindowMicros, rebuiltAt
end

local function noteVersion(touched, user, version)
  redis.call('HSET', touched, user, version)
  redis.call('PEXPIRE', touched, math.floor(rebuildWindowMicros / 1000))
end

local function markTouched(counters, touched, user, version)
  if inRebuildWindow(counters) then
    noteVersion(touched, user, version)
  end
end
