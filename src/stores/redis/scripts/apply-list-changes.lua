--[[
  Applies changes to a user's list of liked or collected posts: the newest
  entries in a sorted set (member: the post, score: when, in ms), at most a
  capacity, older ones left to PostgreSQL behind the horizon.

  The like script runs in the post's slot and cannot touch the user's, so a
  change reaches the list twice: from the API right after the like (so the user
  sees it at once), and from the persist consumer once PostgreSQL committed it
  (`settled`: healing a list the API's write missed, say when the API died
  between the two). Each change carries its version; the list keeps, per post,
  the version of the newest change PostgreSQL may not hold yet (KEYS[3]:
  'epoch:micros:state:ms'), applies a change only when newer, and forgets the
  record once the change that set it, or a newer one, is settled. The records
  also tell readers which of PostgreSQL's rows are stale. A change older than
  the entry it would replace (a later like's) is skipped. One case is not
  caught: a like whose write was delayed until after a later unlike of the same
  post settled finds neither record nor entry, and stays until the next change
  of that post or the list's next load.

  Records are written whether or not Redis holds the list, so a list loaded
  later still sees changes PostgreSQL does not have yet; they expire 10 minutes
  after the last one was written (the persist consumer settles them within
  seconds while it runs).

  Input:
    KEYS[1]      the list's entries (sorted set)
    KEYS[2]      the list's horizon (includes/list-positions.lua); missing: Redis does not hold the list
    KEYS[3]      the list's recent changes (hash)
    ARGV[1]      '1' when PostgreSQL committed these changes, '0' from the API
    ARGV[2]      capacity of the entries
    ARGV[3..]    per change: post id, state (1 member, 0 not), epoch, microseconds, time (ms)

  Output:
    { APPLIED }              applied to the list (each change only when newer)
    { TARGET_ABSENT }        Redis does not hold the list: only the records moved
    { INVALID_ARGUMENTS }
]]
--@include statuses
--@include list-positions

local recentLifetimeMs = 600000
local settled = ARGV[1] == '1'
local capacity = tonumber(ARGV[2])
if (ARGV[1] ~= '1' and ARGV[1] ~= '0') or not capacity or capacity < 1 or (#ARGV - 2) % 5 ~= 0 or #ARGV == 2 then
  return { INVALID_ARGUMENTS }
end
for i = 3, #ARGV, 5 do
  if not string.match(ARGV[i], '^[1-9]%d*$') or (ARGV[i + 1] ~= '1' and ARGV[i + 1] ~= '0')
    or not string.match(ARGV[i + 2], '^%d+$') or not string.match(ARGV[i + 3], '^%d+$') or not string.match(ARGV[i + 4], '^%d+$') then
    return { INVALID_ARGUMENTS }
  end
end

local horizonValue = redis.call('GET', KEYS[2])
local held = horizonValue ~= false
local wroteRecent = false
for i = 3, #ARGV, 5 do
  local id, state, epoch, micros, at = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4])
  local record = redis.call('HGET', KEYS[3], id)
  local rEpoch, rMicros = string.match(record or '', '^(%d+):(%d+):')
  rEpoch, rMicros = tonumber(rEpoch), tonumber(rMicros)
  local newer = not rEpoch or epoch > rEpoch or (epoch == rEpoch and micros > rMicros)
  local raw = redis.call('ZSCORE', KEYS[1], id)
  local score = raw and tonumber(raw)
  if newer and score and score > at then
    newer = false
  end
  if not newer then
    if settled and rEpoch == epoch and rMicros == micros then
      redis.call('HDEL', KEYS[3], id)
    end
  else
    if settled then
      redis.call('HDEL', KEYS[3], id)
    else
      redis.call('HSET', KEYS[3], id, ARGV[i + 2] .. ':' .. ARGV[i + 3] .. ':' .. state .. ':' .. ARGV[i + 4])
      wroteRecent = true
    end
    if held then
      if state == '0' then
        redis.call('ZREM', KEYS[1], id)
      else
        local hAt, hId = horizonOf(horizonValue)
        if not hAt or olderPosition(hAt, hId, at, id) then
          redis.call('ZADD', KEYS[1], at, id)
          trimList(KEYS[1], KEYS[2], capacity)
          horizonValue = redis.call('GET', KEYS[2])
        end
      end
    end
  end
end
if wroteRecent then
  redis.call('PEXPIRE', KEYS[3], recentLifetimeMs)
end
if held then
  return { APPLIED }
end
return { TARGET_ABSENT }
