--[[
  A write's deadline (src/stores/redis/write-deadline.ts): the last millisecond,
  on Redis's clock, at which its caller may still be waiting for its answer. Run
  later (its bytes held in a network, or re-sent on a new connection after the
  caller gave up), a write changes nothing: its caller answered the user that it
  failed, and the user may have acted since.
]]
--@include clock

-- Whether Redis's clock is past `deadline` (milliseconds since the epoch).
local function pastDeadline(deadline)
  return math.floor(clockMicros() / 1000) > deadline
end
