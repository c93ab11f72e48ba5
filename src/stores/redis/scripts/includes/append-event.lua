--[[
  Appends a like change to the partition's outbox stream, stamped with the
  target's next version.

  A version is the target's epoch (counter hash field 'ep', set by each rebuild
  from PostgreSQL: src/stores/versions.ts) and microseconds of the Redis clock,
  forced to grow per target within the epoch (field 'ver'). Changes made after a
  rebuild outrank those made before it, whatever the clocks said.

  Event fields (read by src/stores/redis/outbox-store.ts): t target type,
  i target id, u user, s state after the change (1 liked, 0 not), e epoch,
  v microseconds, a author ('' when unknown), ts time (ms).
  Returns the epoch and the microseconds.
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
  local epoch = redis.call('HGET', counters, epochField) or '0'
  redis.call('XADD', outbox, '*',
    't', targetType, 'i', targetId, 'u', user, 's', liked, 'e', epoch, 'v', version,
    'a', redis.call('HGET', counters, authorField) or '',
    'ts', string.format('%.0f', math.floor(micros / 1000)))
  return epoch, version
end
