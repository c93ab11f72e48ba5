--[[
  Redis's clock in microseconds since the epoch: one TIME, so every API process
  and worker stamps changes on one clock.
]]
local function clockMicros()
  local now = redis.call('TIME')
  return tonumber(now[1]) * 1000000 + tonumber(now[2])
end
