--[[
  What a membership change (add-member.lua, remove-member.lua) reads of its
  target and answers. One HMGET reads the counters of the target's type, which
  the caller names (its type's first counter first: every counter hash holds
  that one), and the bookkeeping a change needs: the relation's newest
  generation, the version, epoch, author and rebuild time. A change then writes
  the counter and the version with one HSET, and the reply's counts come from
  what was read, so a like reads its hash once and never reads it back.
]]
--@include hash-fields
--@include clock
--@include append-event
--@include rebuild-window
--@include history

-- The target as read, or nil when Redis does not hold it, or holds it from another
-- replication history (includes/history.lua). `names` are the counters to answer.
local function readTarget(counters, names, generationField)
  local n = #names
  local fields = { unpack(names) }
  fields[n + 1] = generationField
  fields[n + 2] = versionField
  fields[n + 3] = epochField
  fields[n + 4] = authorField
  fields[n + 5] = rebuiltAtField
  fields[n + 6] = historyField
  local values = redis.call('HMGET', counters, unpack(fields))
  if not trustedHistory(values[n + 6]) then
    return nil
  end
  return {
    key = counters,
    names = names,
    values = values,
    n = n,
    generation = tonumber(values[n + 1] or '0'),
    version = values[n + 2],
    epoch = values[n + 3] or '0',
    author = values[n + 4],
    rebuiltAt = values[n + 5],
  }
end

-- The index of `counter` among the names, or nil.
local function counterIndex(names, counter)
  for i = 1, #names do
    if names[i] == counter then
      return i
    end
  end
  return nil
end

-- A status, then each named counter as held after the change (false where the hash has none).
local function countsReply(status, target)
  local reply = { status }
  for i = 1, target.n do
    reply[i + 1] = target.values[i] and tonumber(target.values[i]) or false
  end
  return reply
end

-- The reply of a change made: APPLIED, the counts, then the change's version (epoch, microseconds),
-- which the caller keeps for a while in case a failover takes the change back.
local function changedReply(target, micros)
  local reply = countsReply(APPLIED, target)
  reply[target.n + 2] = target.epoch
  reply[target.n + 3] = formatMicros(micros)
  return reply
end

-- Moves the counter at `index` by `delta`, stamps the target's next version, appends the
-- change to the outbox and announces it. Notes it in a rebuild window (rebuild-window.lua).
-- Answers the change's microseconds, as its version stamps them.
local function recordChange(target, index, delta, outbox, touched, targetType, targetId, user, state, relationTag)
  local now = clockMicros()
  local micros = versionAfter(target.version, now)
  local value = (tonumber(target.values[index] or '0') or 0) + delta
  target.values[index] = value
  redis.call('HSET', target.key, target.names[index], string.format('%.0f', value), versionField, formatMicros(micros))
  appendMembershipEvent(target.key, outbox, targetType, targetId, user, state, relationTag, target.epoch, micros, target.author)
  if rebuiltWithin(target.rebuiltAt, now) then
    noteChange(touched, user, target.epoch, formatMicros(micros))
  end
  return micros
end

-- A change that changes nothing answers from a state the rebuild read from
-- PostgreSQL, which may lack an older change of this user still in flight. In the
-- window, the state just answered is noted as confirmed (rebuild-window.lua): the
-- late change can then undo it neither in Redis nor in PostgreSQL, and nothing
-- is appended or announced unless such a change arrives.
local function confirmAfterRebuild(target, touched, user, state)
  if not target.rebuiltAt then
    return
  end
  local now = clockMicros()
  if rebuiltWithin(target.rebuiltAt, now) then
    noteConfirmation(touched, user, target.epoch, formatMicros(now), state)
  end
end
