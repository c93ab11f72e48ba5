--[[
  Adds a user to a target's members of one relation (likers, collectors,
  followers) once, counts it, and appends the change to the outbox, all in one
  atomic step that reads the target's hash once (includes/member-change.lua).

  Membership grows by generations (see keys.ts): the relation's newest
  generation is stored in its counter hash field (ARGV[7]); a user is a member
  when any shard of generations 0..newest holds them. A new member goes to the
  newest generation; when the user's shard there is full, the relation moves to
  the next generation, so no shard ever exceeds the capacity.

  Input:
    KEYS[1]       counters: counter hash of the target; its existence marks a target Redis holds
    KEYS[2]       outbox: outbox stream of the target's partition
    KEYS[3]       rebuildWindow: per user, the relation's newest change known since a rebuild (includes/rebuild-window.lua)
    KEYS[4]       receipt: this call's receipt (includes/receipts.lua)
    KEYS[5..n]    shards: the user's membership shard in generations 0..n-5
    ARGV[1]       userId: user id
    ARGV[2]       shardCapacity: shard capacity (members)
    ARGV[3]       counterField: counter field to increment ('like', 'collect', 'followers'); one of ARGV[12..]
    ARGV[4]       targetType: target type, for the event
    ARGV[5]       targetId: target id, for the event
    ARGV[6]       relationTag: relation tag, for the event ('l', 'c', 'f')
    ARGV[7]       generationField: counter hash field of the relation's newest generation
    ARGV[8]       memberIndex: the user's member index of the relation and the target's type
                  (includes/member-index.lua), or '' where Redis keeps none (a cluster)
    ARGV[9]       pendingRecord: the user's pending record of that index (likes not yet persisted), or ''
    ARGV[10]      indexCapacity: the member index's capacity
    ARGV[11]      deadline: the call's deadline, in milliseconds of Redis's clock (includes/deadline.lua)
    ARGV[12..]    answerCounters: the counters of the target's type to answer, its first counter first

  Output:
    { APPLIED, c1, …, e, v } added; c = each counter named in ARGV[12..] after the change (nil where
                           absent); e, v the change's version: its epoch and microseconds
    { UNCHANGED, c1, … }   already a member, nothing changed, appended or announced (in a rebuild
                           window the state answered is noted: includes/member-change.lua)
    { TARGET_ABSENT }      the target's counter hash is not in Redis
    { DEADLINE_PASSED }    run after its deadline: nothing changed
    { TARGET_FULL }        every generation of the relation is full
    { INVALID_ARGUMENTS }

  Safe to repeat: a call run again (re-sent after a lost reply) finds its receipt,
  changes nothing and answers as it did; another call finds the member and
  changes nothing.
]]
--@include statuses
--@include check-user
--@include membership
--@include receipts
--@include member-change
--@include deadline
--@include member-index

local user = ARGV[1]
local capacity = tonumber(ARGV[2])
local counter, targetType, targetId, tag, generationField = ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local memberIndex, pending, indexCapacity, deadline = ARGV[8], ARGV[9], tonumber(ARGV[10]), tonumber(ARGV[11])
local names = { unpack(ARGV, 12) }
local index = counterIndex(names, counter)
if not isUserId(user) or not capacity or capacity < 1 or not index or not targetType or not targetId or not tag or not generationField
  or not memberIndex or not pending or (memberIndex == '') ~= (pending == '') or not indexCapacity or indexCapacity < 1 or not deadline then
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

if findMember(target.generation, user) then
  confirmAfterRebuild(target, KEYS[3], user, '1')
  keepReceipt(receipt, UNCHANGED)
  return countsReply(UNCHANGED, target)
end

if not addMember(target.key, user, capacity, target.generation, generationField) then
  return { TARGET_FULL }
end
local micros = recordChange(target, index, 1, KEYS[2], KEYS[3], targetType, targetId, user, '1', tag)
if memberIndex ~= '' then
  noteJoined(memberIndex, indexCapacity, targetId)
  notePending(pending, targetId, target.epoch, micros)
end
keepReceipt(receipt, APPLIED)
return changedReply(target, micros)
