#!lua flags=allow-cross-slot-keys
--[[
  Applies changes to users' lists of liked or collected posts, many lists in
  one call (a persist batch's, one call per node: src/stores/redis/per-node.ts): the newest
  entries in a sorted set (member: the post, score: when, in ms), at most a
  capacity, older ones left to PostgreSQL behind the horizon.

  The like script runs in the post's slot and cannot touch the user's, so a
  change reaches the list twice: from the API right after the like (so the user
  sees it at once), and from the persist consumer once PostgreSQL committed it
  (healing a list the API's write missed, say when the API died between the
  two). Each change carries its version; the list keeps, per post, a record of
  the newest change it applied (KEYS[3]: 'epoch:micros:state:ms:committed') and
  applies a change only when newer, so the two writes of one change, and writes
  of two changes in either order (two persist batches commit in either order),
  end in the newest state. A change older than the entry it would replace (a
  later like's) is skipped too. The records also tell readers which of
  PostgreSQL's rows may be stale, so a record stays while PostgreSQL may lack
  its change: the hash counts its records not yet committed (field 'pending')
  and expires a day after its last write while any is, two minutes after once
  none is. Past those two minutes a change's writes have long arrived: each
  carries a deadline (ARGV[3]) past which it changes nothing, so a write held
  back in a stalled connection cannot list a like after a later unlike once
  the records are gone. A record of a change that never commits (Redis lost it with its
  outbox, or a write from the API arrived after the records expired) keeps the
  count above zero, and the hash a day after its last write instead of two
  minutes. At most `recentCapacity` fields are kept: a user past that many
  changes before the records expire has the list dropped, to be loaded again
  from PostgreSQL when next read, with the records of committed changes; those
  PostgreSQL may lack stay unless they alone fill the hash, so no key outgrows
  the bound on any key.

  Records are written whether or not Redis holds the list, so a list loaded
  later still sees changes PostgreSQL does not have yet. While the list is
  loading (scripts/load-list.lua) nothing is trimmed: the load trims when done.
  A held list expires a day after its last read or write (the horizon a minute
  before the entries, so a list is never held without them), to be loaded again.

  Input:
    KEYS[1..]    lists: per list, its entries (sorted set), its horizon
                 (includes/list-positions.lua; missing: Redis does not hold the
                 list) and its records of recent changes (hash): KEYS, or on a
                 cluster KEYS[1] and then the ARGV after the changes
    ARGV[1]      capacity: capacity of the entries
    ARGV[2]      committed: '1' when PostgreSQL committed these changes (the persist consumer's write), '0' from the API
    ARGV[3]      deadline: the call's deadline, in milliseconds of Redis's clock (includes/deadline.lua)
    ARGV[4]      listCount: m, the number of lists
    ARGV[5..4+m] changeCounts: c_k, how many changes list k takes (at least one)
    then         the changes of list 1, then of list 2, …: post id, state (1
                 member, 0 not), epoch, microseconds, time (ms)

  Output:
    { APPLIED, held }        each change applied when newer; held: per list '1'
                             when Redis holds it, '0' when only the records moved
    { DEADLINE_PASSED }      run after its deadline: nothing changed
    { INVALID_ARGUMENTS }
]]
--@include statuses
--@include list-positions
--@include node-call
--@include deadline

local recentLifetimeMs = 120000
local pendingLifetimeMs = 86400000
local recentCapacity = 9999
-- Not a post id, so it never collides with a record.
local pendingField = 'pending'
local capacity = tonumber(ARGV[1])
local committed = ARGV[2]
local deadline = tonumber(ARGV[3])
local counts, changes = itemSizes(4)
if not capacity or capacity < 1 or (committed ~= '1' and committed ~= '0') or not deadline or not counts then
  return { INVALID_ARGUMENTS }
end
local m = #counts
local first = 5 + m
local named = first + 5 * changes
if #KEYS < 1 or #ARGV ~= named - 1 + 3 * m - #KEYS then
  return { INVALID_ARGUMENTS }
end
if pastDeadline(deadline) then
  return { DEADLINE_PASSED }
end
for i = first, named - 1, 5 do
  if not string.match(ARGV[i], '^[1-9]%d*$') or (ARGV[i + 1] ~= '1' and ARGV[i + 1] ~= '0')
    or not string.match(ARGV[i + 2], '^%d+$') or not string.match(ARGV[i + 3], '^%d+$') or not string.match(ARGV[i + 4], '^%d+$') then
    return { INVALID_ARGUMENTS }
  end
end

-- Whether a record's change may not be committed yet ('epoch:micros:state:ms:0').
local function isPending(record)
  return string.match(record, '^%d+:%d+:[01]:%d+:0$') ~= nil
end

-- Applies ARGV[from..to] (changes of 5 values) to one list; returns whether Redis holds it.
local function applyList(entriesKey, horizonKey, recentKey, from, to)
  local horizonValue = redis.call('GET', horizonKey)
  if horizonValue and not trustedHorizon(horizonValue) then
    -- Held from another replication history: it may lack changes; loaded again when next read.
    redis.call('DEL', entriesKey, horizonKey)
    horizonValue = false
  end
  local held = horizonValue ~= false
  local wroteRecent = false
  local pendingDelta = 0
  for i = from, to, 5 do
    local id, state, epoch, micros, at = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4])
    local record = redis.call('HGET', recentKey, id)
    local rEpoch, rMicros = string.match(record or '', '^(%d+):(%d+):')
    rEpoch, rMicros = tonumber(rEpoch), tonumber(rMicros)
    -- A record without the flag predates it: taken as committed, so it holds nothing open.
    local rPending = record and isPending(record)
    local newer = not rEpoch or epoch > rEpoch or (epoch == rEpoch and micros > rMicros)
    local raw = redis.call('ZSCORE', entriesKey, id)
    local score = raw and tonumber(raw)
    if newer and score and score > at then
      newer = false
    end
    if not newer and rPending and committed == '1' and epoch == rEpoch and micros == rMicros then
      -- PostgreSQL now holds the change this record speaks for.
      redis.call('HSET', recentKey, id, string.sub(record, 1, -2) .. '1')
      pendingDelta = pendingDelta - 1
      wroteRecent = true
    end
    if newer and not record and redis.call('HLEN', recentKey) >= recentCapacity then
      -- Too many changes to keep apart from PostgreSQL: the list starts again from it when next
      -- read, and the records of changes it holds go; those it may lack stay, unless they alone
      -- fill the hash.
      redis.call('DEL', entriesKey, horizonKey)
      held = false
      horizonValue = false
      local all = redis.call('HGETALL', recentKey)
      local stillPending = 0
      for j = 1, #all, 2 do
        if all[j] ~= pendingField then
          if isPending(all[j + 1]) then
            stillPending = stillPending + 1
          else
            redis.call('HDEL', recentKey, all[j])
          end
        end
      end
      if stillPending >= recentCapacity - 1 then
        redis.call('DEL', recentKey)
        pendingDelta = 0
      end
    end
    if newer then
      redis.call('HSET', recentKey, id, ARGV[i + 2] .. ':' .. ARGV[i + 3] .. ':' .. state .. ':' .. ARGV[i + 4] .. ':' .. committed)
      if record and rPending then
        pendingDelta = pendingDelta - 1
      end
      if committed == '0' then
        pendingDelta = pendingDelta + 1
      end
      wroteRecent = true
      if held then
        if state == '0' then
          redis.call('ZREM', entriesKey, id)
        else
          local hAt, hId = horizonOf(horizonValue)
          if not hAt or olderPosition(hAt, hId, at, id) then
            redis.call('ZADD', entriesKey, at, id)
            if horizonValue ~= 'loading' then
              trimList(entriesKey, horizonKey, capacity)
              horizonValue = redis.call('GET', horizonKey)
            end
          end
        end
      end
    end
  end
  if wroteRecent then
    local pending = tonumber(redis.call('HGET', recentKey, pendingField) or '0') + pendingDelta
    if pending > 0 then
      redis.call('HSET', recentKey, pendingField, pending)
      redis.call('PEXPIRE', recentKey, pendingLifetimeMs)
    else
      redis.call('HDEL', recentKey, pendingField)
      redis.call('PEXPIRE', recentKey, recentLifetimeMs)
    end
  end
  if held then
    keepList(entriesKey, horizonKey)
  end
  return held
end

local held = {}
local at = first
for k = 1, m do
  local last = at + 5 * counts[k] - 1
  held[k] = applyList(nodeKey(3 * k - 2, named), nodeKey(3 * k - 1, named), nodeKey(3 * k, named), at, last) and '1' or '0'
  at = last + 1
end
return { APPLIED, table.concat(held) }
