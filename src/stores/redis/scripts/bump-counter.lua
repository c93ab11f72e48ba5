--[[
  Adds to one counter of a target whose counter hash is in Redis.

  A missing hash stays missing: creating it here would hold one counter
  and make the target look known with every other count at zero.

  Input:
    KEYS[1]      counter hash of the target
    KEYS[2]      this call's receipt (includes/receipts.lua), in the target's slot
    ARGV[1]      counter field
    ARGV[2]      integer delta

  Output:
    { APPLIED, new value }
    { UNCHANGED, value }     this call already ran (re-sent after a lost reply): nothing added again
    { TARGET_ABSENT }        the hash is not in Redis (nothing written)
    { INVALID_ARGUMENTS }
]]
--@include statuses
--@include receipts

local delta = tonumber(ARGV[2])
if not ARGV[1] or ARGV[1] == '' or not delta or delta % 1 ~= 0 then
  return { INVALID_ARGUMENTS }
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return { TARGET_ABSENT }
end
if firstAnswer(KEYS[2]) then
  return { UNCHANGED, tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0') }
end
local value = redis.call('HINCRBY', KEYS[1], ARGV[1], delta)
keepReceipt(KEYS[2], APPLIED)
return { APPLIED, value }
