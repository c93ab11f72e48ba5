#!lua flags=no-writes
--[[
  Which of many targets a user's member index (includes/member-index.lua) rules
  out, for a read answered from PostgreSQL: those it lacks, when it is complete
  in this node's replication history.

  Input:
    KEYS[1]    index: the member index
    ARGV[1]    generation: the writers' fence generation (src/stores/redis/index-fence.ts)
    ARGV[2..]  targetIds: the targets' ids

  Output:
    { APPLIED, ruledOut }  ruledOut: a character per target, '1' when the index lacks it
    { UNCHANGED }          the index rules nothing out: absent, loading, overflowed, or
                           completed in another replication history or fence generation
    { INVALID_ARGUMENTS }
]]
--@include statuses
--@include member-index

local generation = tonumber(ARGV[1])
if not generation or generation < 0 or #ARGV < 2 then
  return { INVALID_ARGUMENTS }
end
local found = redis.call('SMISMEMBER', KEYS[1], indexComplete, indexOverflowed, indexHistoryMark(generation), unpack(ARGV, 2))
if found[1] == 0 or found[2] == 1 or found[3] == 0 then
  return { UNCHANGED }
end
local ruledOut = {}
for i = 4, #found do
  ruledOut[i - 3] = found[i] == 0 and '1' or '0'
end
return { APPLIED, table.concat(ruledOut) }
