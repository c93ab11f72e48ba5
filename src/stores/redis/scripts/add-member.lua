--[[
  Adds a user to a target's members of one relation (likers, collectors,
  followers) once, counts it, and appends the change to the outbox, all in one
  atomic step.

  Membership grows by generations (see keys.ts): the relation's newest
  generation is stored in its counter hash field (ARGV[7]); a user is a member
  when any shard of generations 0..newest holds them. A new member goes to the
  newest generation; when the user's shard there is full, the relation moves to
  the next generation, so no shard ever exceeds the capacity.

  Input:
    KEYS[1]       counter hash of the target; its existence marks a target Redis holds
    KEYS[2]       outbox stream of the target's partition
    KEYS[3]       per user, the relation's newest change known since a rebuild (includes/rebuild-window.lua)
    KEYS[4]       this call's receipt (includes/receipts.lua)
    KEYS[5..n]    the user's membership shard in generations 0..n-5
    ARGV[1]       user id
    ARGV[2]       shard capacity (members)
    ARGV[3]       counter field to increment ('like', 'collect', 'followers')
    ARGV[4]       target type, for the event
    ARGV[5]       target id, for the event
    ARGV[6]       relation tag, for the event ('l', 'c', 'f')
    ARGV[7]       counter hash field of the relation's newest generation

  Output:
    { APPLIED, counters }    added; counters = the counter hash as field/value pairs
    { UNCHANGED, counters }  already a member, nothing changed (no event appended, except
                             in a rebuild window: includes/rebuild-window.lua)
    { TARGET_ABSENT }        the target's counter hash is not in Redis
    { TARGET_FULL }          every generation of the relation is full
    { INVALID_ARGUMENTS }

  Safe to repeat: a call run again (re-sent after a lost reply) finds its receipt,
  changes nothing and answers as it did; another call finds the member and
  changes nothing.
]]
--@include statuses
--@include check-user
--@include membership
--@include append-event
--@include rebuild-window
--@include receipts
--@include confirm-after-rebuild

local counters = KEYS[1]
local user = ARGV[1]
local capacity = tonumber(ARGV[2])
local counter, targetType, targetId, tag, generationField = ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
if not isUserId(user) or not capacity or capacity < 1 or not counter or not targetType or not targetId or not tag or not generationField then
  return { INVALID_ARGUMENTS }
end
if redis.call('EXISTS', counters) == 0 then
  return { TARGET_ABSENT }
end

local receipt = KEYS[4]
local answered = firstAnswer(receipt)
if answered then
  return { answered, redis.call('HGETALL', counters) }
end

local newest = tonumber(redis.call('HGET', counters, generationField) or '0')
if findMember(newest, user) then
  confirmAfterRebuild(counters, KEYS[2], KEYS[3], targetType, targetId, user, '1', tag)
  keepReceipt(receipt, UNCHANGED)
  return { UNCHANGED, redis.call('HGETALL', counters) }
end

if not addMember(counters, user, capacity, newest, generationField) then
  return { TARGET_FULL }
end
redis.call('HINCRBY', counters, counter, 1)
local epoch, version = appendEvent(counters, KEYS[2], targetType, targetId, user, '1', tag)
markTouched(counters, KEYS[3], user, epoch, version)
keepReceipt(receipt, APPLIED)
return { APPLIED, redis.call('HGETALL', counters) }
