--[[
  Adds to one counter of a target whose counter hash is in Redis.

  A missing hash stays missing: creating it here would hold one counter
  and make the target look known with every other count at zero.

  Input:
    KEYS[1]      counter hash of the target
    ARGV[1]      counter field
    ARGV[2]      integer delta

  Output:
    { APPLIED, new value }
    { TARGET_ABSENT }        the hash is not in Redis (nothing written)
    { INVALID_ARGUMENTS }
]]
--@include statuses

local delta = tonumber(ARGV[2])
if not ARGV[1] or ARGV[1] == '' or not delta or delta % 1 ~= 0 then
  return { INVALID_ARGUMENTS }
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return { TARGET_ABSENT }
end
return { APPLIED, redis.call('HINCRBY', KEYS[1], ARGV[1], delta) }
