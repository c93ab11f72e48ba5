--[[
  Takes a cold target out of Redis: its counter hash, every membership shard of
  every relation and its rebuild bookkeeping together, so it comes back whole
  through a rebuild from PostgreSQL. Refuses when a relation grew past the
  generations the caller passed, or when its latest change is newer than what
  PostgreSQL has applied (it would come back without that change until
  replayed; waiting is simpler).

  Input:
    KEYS[1]       counters: counter hash of the target
    KEYS[2]       droppedVersion: where a dropped target leaves the version it last stamped, for its rebuild
    KEYS[3]       lastUses: the last uses of the target's partition (keys.ts, tu:), whose record of it goes too
    KEYS[4..n]    toDelete: the rest to delete: the target's rebuild records and every membership
                  shard of generations 0..ARGV[4] of each of its relations
    ARGV[1]       epoch: epoch of the highest version PostgreSQL applied to the target
    ARGV[2]       micros: its microseconds
    ARGV[3]       mode: '0' to evict; '1' to drop: whatever the target holds and however many generations
                  it has, leaving at KEYS[2] the version it last stamped and its relations' highest
                  generation ('epoch:micros:generation'), for its rebuild. Shards past ARGV[4] stay
                  until that rebuild removes them (the key then has no expiry; otherwise an hour).
                  '2' to drop so only a target loaded in another replication history
                  (includes/history.lua): one this node's history holds is left alone.
    ARGV[4]       newestGeneration: newest generation the caller passed shards for
    ARGV[5]       lastUsesMember: the target's member in KEYS[3]
    ARGV[6..]     generationFields: the counter hash fields holding each relation's newest generation

  Output:
    { APPLIED }              evicted (or dropped)
    { UNCHANGED }            ARGV[3] '2', and the target is of this node's history: left alone
    { TARGET_ABSENT }        not in Redis
    { TOO_MANY_GENERATIONS } a relation grew past ARGV[4]
    { NOT_PERSISTED }        it has changes PostgreSQL has not applied
    { INVALID_ARGUMENTS }
]]
--@include statuses
--@include hash-fields
--@include history

local persistedEpoch = tonumber(ARGV[1])
local persistedMicros = tonumber(ARGV[2])
local passedGenerations = tonumber(ARGV[4])
if not persistedEpoch or not persistedMicros or (ARGV[3] ~= '0' and ARGV[3] ~= '1' and ARGV[3] ~= '2') or not passedGenerations or #KEYS < 3 or not ARGV[5] then
  return { INVALID_ARGUMENTS }
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  -- A record left of a target gone otherwise (a flush of its hash alone) goes with it.
  redis.call('ZREM', KEYS[3], ARGV[5])
  return { TARGET_ABSENT }
end
local drop = ARGV[3] ~= '0'
if ARGV[3] == '2' and trustedHistory(redis.call('HGET', KEYS[1], historyField)) then
  return { UNCHANGED }
end
local generation = 0
for i = 6, #ARGV do
  generation = math.max(generation, tonumber(redis.call('HGET', KEYS[1], ARGV[i]) or '0'))
end
local epoch = tonumber(redis.call('HGET', KEYS[1], epochField) or '0')
local micros = tonumber(redis.call('HGET', KEYS[1], versionField) or '0')
if drop then
  local left = string.format('%.0f:%.0f:%d', epoch, micros, generation)
  if generation > passedGenerations then
    redis.call('SET', KEYS[2], left)
  else
    redis.call('SET', KEYS[2], left, 'PX', 3600000)
  end
else
  if generation > passedGenerations then
    return { TOO_MANY_GENERATIONS }
  end
  if epoch > persistedEpoch or (epoch == persistedEpoch and micros > persistedMicros) then
    return { NOT_PERSISTED }
  end
end
redis.call('DEL', KEYS[1], unpack(KEYS, 4))
redis.call('ZREM', KEYS[3], ARGV[5])
return { APPLIED }
