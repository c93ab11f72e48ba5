--[[
  Appends a change to the partition's outbox stream, stamped with the target's
  next version.

  A version is the target's epoch (counter hash field 'ep', set by each rebuild
  from PostgreSQL: src/stores/versions.ts) and microseconds of the Redis clock,
  forced to grow per target within the epoch (field 'ver'). Changes made after a
  rebuild outrank those made before it, whatever the clocks said. Every change
  of a target, whatever its relation or kind, takes the next version, so a
  reconcile pass can tell from one number whether PostgreSQL has them all.

  Event fields (decoded by src/stores/redis/outbox-entries.ts): t target type,
  i target id, e epoch, v microseconds, ts time (ms), and
    a membership change: r relation tag (absent: a like), u user, s state after
      the change (1 member, 0 not), a author ('' when unknown);
    views (k 'v'): n views added, o the epoch's views counted so far.

  Each change is also announced on sharded pub/sub, on a channel named as the
  counter hash (same slot, so the script stays one-slot on a cluster): API
  processes with live subscribers of the target hear it and read its counts
  (src/stores/redis/count-changes.ts). The message is empty; a channel nobody
  listens to costs Redis a lookup. `pcall`: a Redis without sharded pub/sub (before
  7.0) refuses SPUBLISH, and an announcement must never fail a write already made.
]]
--@include hash-fields
--@include clock

-- Microseconds of the target's next version at `now`: forced past the last one held ('ver', false when none).
local function versionAfter(lastMicros, now)
  local last = tonumber(lastMicros or '0') or 0
  if now <= last then
    return last + 1
  end
  return now
end

local function formatMicros(micros)
  return string.format('%.0f', micros)
end

-- Tells live subscribers the target's counts changed. `pcall`: see above.
local function announce(counters)
  redis.pcall('SPUBLISH', counters, '')
end

-- Appends a membership change of version (epoch, micros) and announces it; the caller stored the version.
local function appendMembershipEvent(counters, outbox, targetType, targetId, user, state, relationTag, epoch, micros, author)
  redis.call('XADD', outbox, '*',
    't', targetType, 'i', targetId, 'r', relationTag, 'u', user, 's', state, 'e', epoch, 'v', formatMicros(micros),
    'a', author or '', 'ts', formatMicros(math.floor(micros / 1000)))
  announce(counters)
end

-- The target's next version, stored in its hash: its epoch and microseconds.
local function nextVersion(counters)
  local micros = versionAfter(redis.call('HGET', counters, versionField), clockMicros())
  redis.call('HSET', counters, versionField, formatMicros(micros))
  return redis.call('HGET', counters, epochField) or '0', micros
end

local function appendViews(counters, outbox, targetType, targetId, added, total)
  local epoch, micros = nextVersion(counters)
  redis.call('XADD', outbox, '*',
    't', targetType, 'i', targetId, 'k', 'v', 'n', added, 'o', total, 'e', epoch, 'v', formatMicros(micros), 'ts', formatMicros(math.floor(micros / 1000)))
  announce(counters)
end
