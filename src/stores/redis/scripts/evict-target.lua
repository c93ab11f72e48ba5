--[[
  Takes a cold target out of Redis: its counter hash and every membership shard
  together, so it comes back whole through a rebuild from PostgreSQL. Refuses
  when the target grew past the generations the caller passed, or when its
  latest change is newer than what PostgreSQL has applied (it would come back
  without that change until replayed; waiting is simpler).

  Input:
    KEYS[1]       counter hash of the target
    KEYS[2]       per user, the newest version known since a rebuild
    KEYS[3]       where a dropped target leaves the version it last stamped, for its rebuild
    KEYS[4..n]    every membership shard of generations 0..ARGV[1]
    ARGV[1]       newest generation the caller passed shards for
    ARGV[2], ARGV[3]  epoch and microseconds of the highest version PostgreSQL applied to the target
    ARGV[4]       '0' to evict; '1' to drop: whatever the target holds and however many generations
                  it has, leaving at KEYS[3] the version it last stamped and its generation
                  ('epoch:micros:generation'), for its rebuild. Shards past ARGV[1] stay until that
                  rebuild removes them (the key then has no expiry; otherwise an hour).

  Output:
    { APPLIED }              evicted
    { TARGET_ABSENT }        not in Redis
    { TOO_MANY_GENERATIONS } the target grew past ARGV[1]
    { NOT_PERSISTED }        it has changes PostgreSQL has not applied
    { INVALID_ARGUMENTS }
]]
--@include statuses
--@include hash-fields

local passedGenerations = tonumber(ARGV[1])
local persistedEpoch = tonumber(ARGV[2])
local persistedMicros = tonumber(ARGV[3])
if not passedGenerations or not persistedEpoch or not persistedMicros or (ARGV[4] ~= '0' and ARGV[4] ~= '1') or #KEYS < 4 then
  return { INVALID_ARGUMENTS }
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return { TARGET_ABSENT }
end
local generation = tonumber(redis.call('HGET', KEYS[1], generationField) or '0')
local epoch = tonumber(redis.call('HGET', KEYS[1], epochField) or '0')
local micros = tonumber(redis.call('HGET', KEYS[1], versionField) or '0')
if ARGV[4] == '1' then
  local left = string.format('%.0f:%.0f:%d', epoch, micros, generation)
  if generation > passedGenerations then
    redis.call('SET', KEYS[3], left)
  else
    redis.call('SET', KEYS[3], left, 'PX', 3600000)
  end
else
  if generation > passedGenerations then
    return { TOO_MANY_GENERATIONS }
  end
  if epoch > persistedEpoch or (epoch == persistedEpoch and micros > persistedMicros) then
    return { NOT_PERSISTED }
  end
end
redis.call('DEL', KEYS[1], KEYS[2], unpack(KEYS, 4))
return { APPLIED }
