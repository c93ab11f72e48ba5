#!lua flags=no-writes
--[[
  Which of many targets a user's member index (includes/member-index.lua) rules
  out, for a read answered from PostgreSQL: those it lacks, when it is complete
  in this node's replication history.

  Input:
    KEYS[1]    the member index
    ARGV       the targets' ids

  Output:
    { APPLIED, ruledOut }  ruledOut: a character per target, '1' when the index lacks it
    { UNCHANGED }          the index rules nothing out: absent, loading, overflowed, or
                           completed in another replication history
]]
--@include statuses
--@include member-index

local found = redis.call('SMISMEMBER', KEYS[1], indexComplete, indexOverflowed, indexHistoryMark(), unpack(ARGV))
if found[1] == 0 or found[2] == 1 or found[3] == 0 then
  return { UNCHANGED }
end
local ruledOut = {}
for i = 4, #found do
  ruledOut[i - 3] = found[i] == 0 and '1' or '0'
end
return { APPLIED, table.concat(ruledOut) }
