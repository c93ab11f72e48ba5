--[[
  Takes a cold target out of Redis: its counter hash and every membership shard
  together, so it comes back whole through a rebuild from PostgreSQL. Refuses
  when the target grew past the generations the caller passed, or when its
  latest change is newer than what PostgreSQL has applied (it would come back
  without that change until replayed; waiting is simpler).

  Input:
    KEYS[1]       counter hash of the target
    KEYS[2]       per user, the newest version known since a rebuild
    KEYS[3..n]    every membership shard of generations 0..ARGV[1]
    ARGV[1]       newest generation the caller passed shards for
    ARGV[2]       highest version PostgreSQL applied to the target

  Output:
    1 evicted, 0 not in Redis, -1 grew past ARGV[1], -4 changes not yet in PostgreSQL
]]
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
if tonumber(redis.call('HGET', KEYS[1], 'gen') or '0') > tonumber(ARGV[1]) then
  return -1
end
if tonumber(redis.call('HGET', KEYS[1], 'ver') or '0') > tonumber(ARGV[2]) then
  return -4
end
redis.call('DEL', unpack(KEYS))
return 1
