--[[
  Brings into Redis a membership change that PostgreSQL applied after the target was
  rebuilt from it, but that was made before the rebuild (an earlier epoch): the
  rebuild could not see it. Skipped when Redis made it (the current epoch or
  later) or when Redis knows a newer change of this user (made or replayed since
  the rebuild). Appends no outbox event: PostgreSQL already has the change. One
  exception: when the user's note is a confirmation (includes/rebuild-window.lua)
  of the other state, the state the user was answered is appended as a change
  of its own, newer than this one, so PostgreSQL ends in it too.

  Input:
    KEYS[1]       counters: counter hash of the target
    KEYS[2]       outbox: outbox stream of the target's partition (a confirmation's change goes there)
    KEYS[3]       rebuildWindow: per user, the relation's newest change known since the rebuild
    KEYS[4]       receipt: a receipt key (unused: a replay is safe to repeat by its version; keeps the key layout of add-member.lua)
    KEYS[5..n]    shards: the user's membership shard in generations 0..n-5
    ARGV[1]       userId: user id
    ARGV[2]       state: state after the change: 1 member, 0 not
    ARGV[3]       epoch: epoch of the change
    ARGV[4]       micros: microseconds of the change
    ARGV[5]       shardCapacity: shard capacity (members)
    ARGV[6]       rebuildEpoch: the epoch of the rebuild that missed the change: another means the target was
                  rebuilt again since, and that rebuild's snapshot holds the change
    ARGV[7]       counterField: the relation's counter field
    ARGV[8]       generationField: counter hash field of the relation's newest generation
    ARGV[9]       memberIndex: the user's member index of the relation and the target's type
                  (includes/member-index.lua), or '' where Redis keeps none (a cluster)
    ARGV[10]      indexCapacity: the member index's capacity
    ARGV[11]      targetId: the target's id, noted in the member index when the user joins
    ARGV[12]      targetType: the target's type, for a confirmation's event
    ARGV[13]      relationTag: the relation's tag, for a confirmation's event ('l', 'c', 'f')

  Output:
    { APPLIED }              replayed
    { UNCHANGED }            nothing to do in Redis (a confirmation may have been appended)
    { TOO_LATE }             made before the rebuild, but the rebuild window closed (or its
                             record of users filled up): Redis no longer knows what superseded
                             it, and the caller rebuilds the target
    { TARGET_FULL }          every generation of the relation is full
    { INVALID_ARGUMENTS }
]]
--@include statuses
--@include check-user
--@include membership
--@include rebuild-window
--@include append-event
--@include member-index

local counters = KEYS[1]
local user = ARGV[1]
local epoch = tonumber(ARGV[3])
local micros = tonumber(ARGV[4])
local capacity = tonumber(ARGV[5])
local intoEpoch = tonumber(ARGV[6])
local counter, generationField = ARGV[7], ARGV[8]
local memberIndex, indexCapacity, targetId = ARGV[9], tonumber(ARGV[10]), ARGV[11]
local targetType, relationTag = ARGV[12], ARGV[13]
if not isUserId(user) or (ARGV[2] ~= '1' and ARGV[2] ~= '0') or not epoch or not micros or not capacity or not intoEpoch or not counter or not generationField
  or not memberIndex or not indexCapacity or indexCapacity < 1 or not targetId or not targetType or not relationTag then
  return { INVALID_ARGUMENTS }
end
if redis.call('EXISTS', counters) == 0 then
  return { UNCHANGED }
end
local currentEpoch = tonumber(redis.call('HGET', counters, epochField) or '0')
if epoch >= currentEpoch or currentEpoch ~= intoEpoch then
  return { UNCHANGED }
end
if not inRebuildWindow(counters) then
  return { TOO_LATE }
end
local notedEpoch, notedMicros, confirmed = notedChange(KEYS[3], user)
if not notedEpoch then
  return { TOO_LATE }
end
if notedEpoch > epoch or (notedEpoch == epoch and notedMicros >= micros) then
  if confirmed and confirmed ~= ARGV[2] then
    local changeEpoch, changeMicros = nextVersion(counters)
    appendMembershipEvent(counters, KEYS[2], targetType, targetId, user, confirmed, relationTag, changeEpoch, changeMicros, redis.call('HGET', counters, authorField))
    noteChange(KEYS[3], user, changeEpoch, formatMicros(changeMicros))
  end
  return { UNCHANGED }
end

local newest = tonumber(redis.call('HGET', counters, generationField) or '0')
local shard = findMember(newest, user)
local status = UNCHANGED
if ARGV[2] == '1' and not shard then
  if not addMember(counters, user, capacity, newest, generationField) then
    return { TARGET_FULL }
  end
  redis.call('HINCRBY', counters, counter, 1)
  -- The like's own note may be lost with the last second of writes Redis lost: note it again.
  if memberIndex ~= '' then
    noteReplayed(memberIndex, indexCapacity, targetId)
  end
  status = APPLIED
elseif ARGV[2] == '0' and shard then
  redis.call('SREM', KEYS[shard], user)
  redis.call('HINCRBY', counters, counter, -1)
  status = APPLIED
end
noteChange(KEYS[3], user, ARGV[3], ARGV[4])
return { status }
