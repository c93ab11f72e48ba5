--[[
  Creates a target's counter hash unless it exists, marking the target known.

  Input:
    KEYS[1]      counter hash of the target
    ARGV         field, value, field, value, ... (at least one pair)

  Output:
    1 created, 0 it already existed (left untouched), -3 invalid arguments
]]
--@include check-counter-fields

if not areCounterFields(ARGV) then
  return -3
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1
