--[[
  Brings into Redis a like change that PostgreSQL applied after the target was
  rebuilt from it, but that was made before the rebuild: the rebuild could not
  see it. Skipped when the change is newer than the rebuild (Redis made it),
  when the rebuild window is over, or when Redis knows a newer change of this
  user (made or replayed since the rebuild). Appends no outbox event:
  PostgreSQL already has the change. Raises the target's version to the
  change's, so Redis and PostgreSQL agree on the newest applied version.

  Input:
    KEYS[1]       counter hash of the target
    KEYS[2]       outbox stream of the target's partition (unused; keeps the key layout of like.lua)
    KEYS[3]       per user, the newest version known since the rebuild
    KEYS[4]       a receipt key (unused: a replay is safe to repeat by its version; keeps the key layout of like.lua)
    KEYS[5..n]    the user's membership shard in generations 0..n-5
    ARGV[1]       user id
    ARGV[2]       state after the change: 1 liked, 0 not
    ARGV[3]       version of the change
    ARGV[4]       shard capacity (members)

  Output:
    { APPLIED }              replayed
    { UNCHANGED }            nothing to do
    { TARGET_FULL }          every generation of the target is full
    { INVALID_ARGUMENTS }
]]
--@include statuses
--@include check-user
--@include membership
--@include rebuild-window

local counters = KEYS[1]
local user = ARGV[1]
local version = tonumber(ARGV[3])
local capacity = tonumber(ARGV[4])
if not isUserId(user) or (ARGV[2] ~= '1' and ARGV[2] ~= '0') or not version or not capacity then
  return { INVALID_ARGUMENTS }
end
if redis.call('EXISTS', counters) == 0 then
  return { UNCHANGED }
end
local open, rebuiltAt = inRebuildWindow(counters)
if not open or version >= rebuiltAt or version <= tonumber(redis.call('HGET', KEYS[3], user) or '0') then
  return { UNCHANGED }
end

local newest = tonumber(redis.call('HGET', counters, generationField) or '0')
local shard = findMember(newest, user)
local status = UNCHANGED
if ARGV[2] == '1' and not shard then
  if not addMember(counters, user, capacity, newest) then
    return { TARGET_FULL }
  end
  redis.call('HINCRBY', counters, 'like', 1)
  status = APPLIED
elseif ARGV[2] == '0' and shard then
  redis.call('SREM', KEYS[shard], user)
  redis.call('HINCRBY', counters, 'like', -1)
  status = APPLIED
end
noteVersion(KEYS[3], user, ARGV[3])
if version > tonumber(redis.call('HGET', counters, versionField) or '0') then
  redis.call('HSET', counters, versionField, ARGV[3])
end
return { status }
