#!lua flags=allow-cross-slot-keys
--[[
  Notes a target rebuilt from PostgreSQL in the member indexes of its members
  that exist (includes/member-index.lua): the adds of those memberships noted
  them once, but a Redis that lost its last second of writes may have lost the
  note and kept the index. An index that does not exist is left so: its load
  reads PostgreSQL, which holds these memberships.

  Input:
    KEYS[1..n]   indexes: the member indexes of the target's members (of one relation)
    ARGV[1]      targetId: the target's id
    ARGV[2]      indexCapacity: an index's capacity

  Output:
    { APPLIED }
    { INVALID_ARGUMENTS }
]]
--@include statuses
--@include member-index

local targetId = ARGV[1]
local capacity = tonumber(ARGV[2])
if not targetId or not capacity or capacity < 1 then
  return { INVALID_ARGUMENTS }
end
for i = 1, #KEYS do
  noteJoined(KEYS[i], capacity, targetId)
end
return { APPLIED }
