--[[
  Removes a user from a target's members of one relation, counts it down, and
  appends the change to the outbox, all in one atomic step that reads the
  target's hash once (includes/member-change.lua).

  Input:
    KEYS[1]       counters: counter hash of the target; its existence marks a target Redis holds
    KEYS[2]       outbox: outbox stream of the target's partition
    KEYS[3]       rebuildWindow: per user, the relation's newest change known since a rebuild (includes/rebuild-window.lua)
    KEYS[4]       receipt: this call's receipt (includes/receipts.lua)
    KEYS[5..n]    shards: the user's membership shard in generations 0..n-5
    ARGV[1]       userId: user id
    ARGV[2]       counterField: counter field to decrement ('like', 'collect', 'followers'); one of ARGV[8..]
    ARGV[3]       targetType: target type, for the event
    ARGV[4]       targetId: target id, for the event
    ARGV[5]       relationTag: relation tag, for the event ('l', 'c', 'f')
    ARGV[6]       generationField: counter hash field of the relation's newest generation
    ARGV[7]       deadline: the call's deadline, in milliseconds of Redis's clock (includes/deadline.lua)
    ARGV[8..]     answerCounters: the counters of the target's type to answer, its first counter first

  Output:
    { APPLIED, c1, …, e, v } removed; c = each counter named in ARGV[8..] after the change (nil where
                           absent); e, v the change's version: its epoch and microseconds
    { UNCHANGED, c1, … }   not a member, nothing changed, appended or announced (in a rebuild
                           window the state answered is noted: includes/member-change.lua)
    { TARGET_ABSENT }      the target's counter hash is not in Redis
    { DEADLINE_PASSED }    run after its deadline: nothing changed
    { INVALID_ARGUMENTS }

  Safe to repeat: a call run again (re-sent after a lost reply) finds its receipt,
  changes nothing and answers as it did; another call finds no member and
  changes nothing.
]]
--@include statuses
--@include check-user
--@include membership
--@include receipts
--@include member-change
--@include deadline

local user = ARGV[1]
local counter, targetType, targetId, tag, generationField = ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local deadline = tonumber(ARGV[7])
local names = { unpack(ARGV, 8) }
local index = counterIndex(names, counter)
if not isUserId(user) or not index or not targetType or not targetId or not tag or not generationField or not deadline then
  return { INVALID_ARGUMENTS }
end
local target = readTarget(KEYS[1], names, generationField)
if not target then
  return { TARGET_ABSENT }
end

local receipt = KEYS[4]
local answered = firstAnswer(receipt)
if answered then
  return countsReply(answered, target)
end
if pastDeadline(deadline) then
  return { DEADLINE_PASSED }
end

local shard = findMember(target.generation, user)
if not shard then
  confirmAfterRebuild(target, KEYS[3], user, '0')
  keepReceipt(receipt, UNCHANGED)
  return countsReply(UNCHANGED, target)
end

redis.call('SREM', KEYS[shard], user)
local micros = recordChange(target, index, -1, KEYS[2], KEYS[3], targetType, targetId, user, '0', tag)
keepReceipt(receipt, APPLIED)
return changedReply(target, micros)
