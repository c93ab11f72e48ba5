--[[
  Completes a user's member index (includes/member-index.lua) with the
  memberships PostgreSQL holds, read after the load began (begin-member-index.lua),
  and the likes the user's pending record holds (made, not yet persisted): what
  the index noted meanwhile stays, so the union holds every membership, whether
  it reached PostgreSQL before the read, is still on its way to it, or was noted
  since (by its add, its replay or its target's rebuild).

  It completes only while every process writing is of the caller's protocol,
  under the fence generation the caller knows (includes/writer-fence.lua): a
  process of another version may not note its likes in the index.

  Input:
    KEYS[1]   index: the member index
    KEYS[2]   pendingRecord: its user's pending record: likes noted and not yet in PostgreSQL, added too
    KEYS[3]   writers: the writers' registry (register-writer.lua)
    ARGV[1]   capacity: its capacity
    ARGV[2]   overflowed: 1 when PostgreSQL holds more memberships than the capacity, else 0
    ARGV[3]   protocol: the caller's protocol: how its version notes memberships in indexes
    ARGV[4]   generation: the fence generation the caller knows
    ARGV[5..] targetIds: the ids of the targets PostgreSQL holds the user a member of

  Output:
    { APPLIED }            the index is complete (in this node's replication history and the
                           fence generation), or overflowed
    { FENCED }             nothing completed: a process of another protocol writes, or the
                           generation moved on; the index answers nothing until loaded again
    { INVALID_ARGUMENTS }
]]
--@include statuses
--@include member-index
--@include writer-fence

local index = KEYS[1]
local capacity = tonumber(ARGV[1])
local over = ARGV[2]
local protocol, generation = ARGV[3], tonumber(ARGV[4])
if not capacity or capacity < 1 or (over ~= '0' and over ~= '1') or not protocol or not string.match(protocol, '^%d+$') or not generation then
  return { INVALID_ARGUMENTS }
end
if not fenceOpen(KEYS[3], protocol, generation) then
  return { FENCED }
end
if over == '0' then
  -- In steps, under Lua's bound on unpacked values.
  for from = 5, #ARGV, 1000 do
    redis.call('SADD', index, unpack(ARGV, from, math.min(#ARGV, from + 999)))
  end
end
-- Likes not yet in PostgreSQL: the read above missed them, and their note may have gone with an earlier index.
local pending = redis.call('HKEYS', KEYS[2])
for from = 1, #pending, 1000 do
  redis.call('SADD', index, unpack(pending, from, math.min(#pending, from + 999)))
end
redis.call('SREM', index, indexLoading)
-- The marks aside, at most the capacity.
if over == '1' or redis.call('SCARD', index) - redis.call('SMISMEMBER', index, indexOverflowed)[1] > capacity then
  redis.call('SADD', index, indexOverflowed)
else
  redis.call('SADD', index, indexComplete, indexHistoryMark(generation))
end
return { APPLIED }
