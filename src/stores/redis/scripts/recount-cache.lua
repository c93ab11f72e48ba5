--[[
  Sets a target's like counter to its number of members, unless the target
  changed since the caller looked at it.

  Input:
    KEYS[1]       counter hash of the target
    KEYS[2..n]    every membership shard of generations 0..newest
    ARGV[1]       the version the caller saw (hash field 'ver', 0 when absent)

  Output:
    the new count, -1 when the target is not in Redis, -5 when it changed since
]]
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
if (redis.call('HGET', KEYS[1], 'ver') or '0') ~= ARGV[1] then
  return -5
end
local members = 0
for i = 2, #KEYS do
  members = members + redis.call('SCARD', KEYS[i])
end
redis.call('HSET', KEYS[1], 'like', members)
return members
