--[[
  After a target's counter hash is rebuilt from PostgreSQL (field 'rb' = rebuild
  time, microseconds), changes made before the rebuild may still be on their way
  to PostgreSQL. For a while the target remembers which users acted on it since
  the rebuild (KEYS[3], a set), so a late change of another user can be replayed
  into Redis (replay-change.lua) without undoing anything newer.
]]
local rebuildWindowMicros = 600000000

local function nowMicros()
  local now = redis.call('TIME')
  return tonumber(now[1]) * 1000000 + tonumber(now[2])
end

-- Whether the counter hash was rebuilt less than the window ago; returns the rebuild time too.
local function inRebuildWindow(counters)
  local rebuiltAt = tonumber(redis.call('HGET', counters, 'rb') or '0')
  return rebuiltAt > 0 and nowMicros() - rebuiltAt < rebuildWindowMicros, rebuiltAt
end

local function markTouched(counters, touched, user)
  if inRebuildWindow(counters) then
    redis.call('SADD', touched, user)
    redis.call('PEXPIRE', touched, math.floor(rebuildWindowMicros / 1000))
  end
end
