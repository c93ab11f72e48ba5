--[[
  Redis's clock in microseconds since the epoch: one TIME, so every API process
  and worker stamps changes on one clock. Read once per script run: a script is
  atomic, so one instant serves its deadline check and its stamps alike, and a
  like costs one TIME, not one per use.
]]
local clockRead = nil

local function clockMicros()
  if not clockRead then
    local now = redis.call('TIME')
    clockRead = tonumber(now[1]) * 1000000 + tonumber(now[2])
  end
  return clockRead
end
