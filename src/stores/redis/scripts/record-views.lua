--[[
  Counts views of a post and appends them to the outbox, in one atomic step:
  the post's 'read' counter, and the views of its current epoch (field 'vt'),
  whose running total the event carries so that PostgreSQL adds each view once
  however the event is batched, repeated or reordered (view_totals).

  A process numbers its flushes, and the post keeps the number of the last one
  it took from each process (KEYS[3]): a flush numbered no higher is one already
  counted, re-sent after a lost reply or retried after a timeout, or a stale one
  that a stalled connection delivers after a newer flush, and counts nothing.
  The number is kept ten minutes after the sender's last flush of the post: a
  process gives up a flush long before (src/domain/views.ts), and a flush carries
  a deadline past which it counts nothing, so none held in a stalled connection
  counts after its sender retried it. One key per post
  and process, where a receipt per flush would cost a key per post per second.

  Input:
    KEYS[1]       counters: counter hash of the post; its existence marks a target Redis holds
    KEYS[2]       outbox: outbox stream of the post's partition
    KEYS[3]       lastFlush: the number of the last flush the post took from this sender
    ARGV[1]       views: views to add (a positive integer)
    ARGV[2]       targetType: target type, for the event
    ARGV[3]       targetId: target id, for the event
    ARGV[4]       flush: the number of this flush (a positive integer)
    ARGV[5]       deadline: the call's deadline, in milliseconds of Redis's clock (includes/deadline.lua):
                  a flush held past it counts nothing, so one held longer than the
                  post keeps the number never counts a retried flush twice

  Output:
    { APPLIED, read }        counted; read = the post's views now
    { UNCHANGED, read }      the post took this flush or a later one: nothing counted again
    { TARGET_ABSENT }        the post's counter hash is not in Redis, or was loaded in another
                             replication history (includes/history.lua): counting would stamp it
                             with a new version, and a failover's suspect post then looks as new
                             as PostgreSQL and is adopted without the changes the failover lost
    { DEADLINE_PASSED }      run after its deadline: nothing changed
    { INVALID_ARGUMENTS }
]]
--@include statuses
--@include deadline
--@include hash-fields
--@include history
--@include append-event

local flushLifetimeMs = 600000
local added = tonumber(ARGV[1])
local seq = tonumber(ARGV[4])
local deadline = tonumber(ARGV[5])
if not added or added < 1 or added % 1 ~= 0 or not ARGV[2] or not ARGV[3] or not seq or seq < 1 or seq % 1 ~= 0 or not deadline then
  return { INVALID_ARGUMENTS }
end
if pastDeadline(deadline) then
  return { DEADLINE_PASSED }
end
if not trustedHistory(redis.call('HGET', KEYS[1], historyField)) then
  return { TARGET_ABSENT }
end
if seq <= tonumber(redis.call('GET', KEYS[3]) or '0') then
  return { UNCHANGED, tonumber(redis.call('HGET', KEYS[1], 'read') or '0') }
end
local read = redis.call('HINCRBY', KEYS[1], 'read', added)
local total = redis.call('HINCRBY', KEYS[1], epochViewsField, added)
appendViews(KEYS[1], KEYS[2], ARGV[2], ARGV[3], ARGV[1], total)
redis.call('SET', KEYS[3], ARGV[4], 'PX', flushLifetimeMs)
return { APPLIED, read }
