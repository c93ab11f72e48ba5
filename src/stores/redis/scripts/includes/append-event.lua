--[[
  Appends a like change to the partition's outbox stream, stamped with the
  target's next version.

  Versions are microseconds of the Redis clock, forced to grow per target
  (kept in the counter hash field 'ver'). A version outlives the hash itself:
  when Redis loses a target and rebuilds it, new changes still carry versions
  above every one PostgreSQL has applied, as long as the clock moves forward.

  Event fields (read by src/stores/redis/outbox-store.ts): t target type,
  i target id, u user, s state after the change (1 liked, 0 not), v version,
  a author ('' when unknown), ts time (ms). Returns the version.
]]
--@include hash-fields

local function appendEvent(counters, outbox, targetType, targetId, user, liked)
  local now = redis.call('TIME')
  local micros = tonumber(now[1]) * 1000000 + tonumber(now[2])
  local last = tonumber(redis.call('HGET', counters, versionField) or '0')
  if micros <= last then
    micros = last + 1
  end
  local version = string.format('%.0f', micros)
  redis.call('HSET', counters, versionField, version)
  redis.call('XADD', outbox, '*',
    't', targetType, 'i', targetId, 'u', user, 's', liked, 'v', version,
    'a', redis.call('HGET', counters, authorField) or '',
    'ts', string.format('%.0f', math.floor(micros / 1000)))
  return version
end
