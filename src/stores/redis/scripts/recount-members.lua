--[[
  Sets a relation's counter on a target to its number of members, unless the
  target changed since the caller looked at it.

  Input:
    KEYS[1]       counters: counter hash of the target
    KEYS[2..n]    shards: every membership shard of the relation's generations 0..newest
    ARGV[1]       epoch: the epoch the caller saw (hash field 'ep', 0 when absent)
    ARGV[2]       micros: the microseconds the caller saw (hash field 'ver', 0 when absent)
    ARGV[3]       counterField: the relation's counter field

  Output:
    { APPLIED, new count }
    { TARGET_ABSENT }        the target is not in Redis
    { CHANGED_SINCE }        its version is no longer ARGV[1], ARGV[2]
    { INVALID_ARGUMENTS }
]]
--@include statuses
--@include hash-fields

if not ARGV[1] or not string.match(ARGV[1], '^%d+$') or not ARGV[2] or not string.match(ARGV[2], '^%d+$') or not ARGV[3] then
  return { INVALID_ARGUMENTS }
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return { TARGET_ABSENT }
end
if (redis.call('HGET', KEYS[1], epochField) or '0') ~= ARGV[1] or (redis.call('HGET', KEYS[1], versionField) or '0') ~= ARGV[2] then
  return { CHANGED_SINCE }
end
local members = 0
for i = 2, #KEYS do
  members = members + redis.call('SCARD', KEYS[i])
end
redis.call('HSET', KEYS[1], ARGV[3], members)
return { APPLIED, members }
