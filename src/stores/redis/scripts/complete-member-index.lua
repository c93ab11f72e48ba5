--[[
  Completes a user's member index (includes/member-index.lua) with the
  memberships PostgreSQL holds, read after the index was asked for: what the
  index noted meanwhile stays, so the union holds every membership, whether it
  reached PostgreSQL before the read or was noted by its add since.

  Input:
    KEYS[1]   the member index
    ARGV[1]   its capacity
    ARGV[2]   1 when PostgreSQL holds more memberships than the capacity, else 0
    ARGV[3..] the ids of the targets PostgreSQL holds the user a member of

  Output:
    { APPLIED }            the index is complete, or overflowed
    { INVALID_ARGUMENTS }
]]
--@include statuses
--@include member-index

local index = KEYS[1]
local capacity = tonumber(ARGV[1])
local over = ARGV[2]
if not capacity or capacity < 1 or (over ~= '0' and over ~= '1') then
  return { INVALID_ARGUMENTS }
end
if over == '1' or redis.call('SCARD', index) + #ARGV - 2 > capacity then
  redis.call('SADD', index, indexOverflowed)
  return { APPLIED }
end
-- In steps, under Lua's bound on unpacked values.
for from = 3, #ARGV, 1000 do
  redis.call('SADD', index, unpack(ARGV, from, math.min(#ARGV, from + 999)))
end
redis.call('SADD', index, indexComplete)
return { APPLIED }
