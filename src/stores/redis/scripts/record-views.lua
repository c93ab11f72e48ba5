--[[
  Counts views of a post and appends them to the outbox, in one atomic step:
  the post's 'read' counter, and the views of its current epoch (field 'vt'),
  whose running total the event carries so that PostgreSQL adds each view once
  however the event is batched, repeated or reordered (view_totals).

  Input:
    KEYS[1]       counter hash of the post; its existence marks a target Redis holds
    KEYS[2]       outbox stream of the post's partition
    KEYS[3]       this call's receipt (includes/receipts.lua)
    ARGV[1]       views to add (a positive integer)
    ARGV[2]       target type, for the event
    ARGV[3]       target id, for the event

  Output:
    { APPLIED, read }        counted; read = the post's views now
    { UNCHANGED, read }      this call already ran (re-sent after a lost reply): nothing counted again
    { TARGET_ABSENT }        the post's counter hash is not in Redis
    { INVALID_ARGUMENTS }
]]
--@include statuses
--@include hash-fields
--@include append-event
--@include receipts

local added = tonumber(ARGV[1])
if not added or added < 1 or added % 1 ~= 0 or not ARGV[2] or not ARGV[3] then
  return { INVALID_ARGUMENTS }
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return { TARGET_ABSENT }
end
if firstAnswer(KEYS[3]) then
  return { UNCHANGED, tonumber(redis.call('HGET', KEYS[1], 'read') or '0') }
end
local read = redis.call('HINCRBY', KEYS[1], 'read', added)
local total = redis.call('HINCRBY', KEYS[1], epochViewsField, added)
appendViews(KEYS[1], KEYS[2], ARGV[2], ARGV[3], ARGV[1], total)
keepReceipt(KEYS[3], APPLIED)
return { APPLIED, read }
