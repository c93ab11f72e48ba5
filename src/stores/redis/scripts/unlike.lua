--[[
  Removes a user from a target's likers and counts it down, atomically.

  Input:
    KEYS[1]       counter hash of the target; its existence marks a known target
    KEYS[2..n]    the user's membership shard in generations 0..n-2
    ARGV[1]       user id
    ARGV[2]       counter field to decrement ('like')

  Output:
    { 1, counters }  removed; counters = the counter hash as field/value pairs
    { 0, counters }  not a member, nothing changed
    { -1 }           the target's counter hash is not in Redis
    { -3 }           invalid arguments

  Safe to repeat: a repeated call finds no member and changes nothing.
]]
--@include check-user
--@include find-member

local counters = KEYS[1]
local user = ARGV[1]
if not isUserId(user) or not ARGV[2] then
  return { -3 }
end
if redis.call('EXISTS', counters) == 0 then
  return { -1 }
end

local newest = tonumber(redis.call('HGET', counters, 'gen') or '0')
local shard = findMember(newest, user)
if not shard then
  return { 0, redis.call('HGETALL', counters) }
end

redis.call('SREM', KEYS[shard], user)
redis.call('HINCRBY', counters, ARGV[2], -1)
-- Outbox: the persistence event for this change is appended here, in the same atomic step.
return { 1, redis.call('HGETALL', counters) }
