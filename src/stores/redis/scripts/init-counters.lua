--[[
  Creates a target's counter hash unless it exists, marking the target known.

  Input:
    KEYS[1]      counter hash of the target
    ARGV         field, value, field, value, ... (at least one pair)

  Output:
    1 created, 0 it already existed (left untouched), -3 invalid arguments
]]
local n = #ARGV
if n == 0 or n % 2 == 1 then
  return -3
end
for i = 2, n, 2 do
  if not tonumber(ARGV[i]) then
    return -3
  end
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1
