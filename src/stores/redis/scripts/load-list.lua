--[[
  Completes the load of a user's list from PostgreSQL. Before reading
  PostgreSQL the caller set the horizon to 'loading' and emptied the entries,
  so changes arriving meanwhile (scripts/apply-list-changes.lua) were already
  applied; the records of recent changes speak for their posts, whether or not
  PostgreSQL held the change when it was read. The snapshot's entries join
  except where a record speaks for the post, the records are applied (those
  written while Redis did not hold the list), the entries are trimmed to the
  capacity and the horizon is set, stamped with this node's replication history.

  Input:
    KEYS[1]      entries: the list's entries (sorted set)
    KEYS[2]      horizon: the list's horizon
    KEYS[3]      recent: the list's recent changes
    ARGV[1]      capacity: capacity of the entries
    ARGV[2]      postgresHorizon: PostgreSQL's horizon: '' when it holds no entry older than those passed,
                 else 'ms:id' of the newest entry it holds that was not passed
    ARGV[3..]    newestEntries: the newest entries PostgreSQL holds, newest first: post id, time (ms)

  Output:
    { APPLIED }
    { UNCHANGED }            the list was not loading (another load finished it, or it was dropped)
    { INVALID_ARGUMENTS }
]]
--@include statuses
--@include list-positions

local capacity = tonumber(ARGV[1])
if not capacity or capacity < 1 or (ARGV[2] ~= '' and not horizonOf(ARGV[2])) or (#ARGV - 2) % 2 ~= 0 then
  return { INVALID_ARGUMENTS }
end
for i = 3, #ARGV, 2 do
  if not string.match(ARGV[i], '^[1-9]%d*$') or not string.match(ARGV[i + 1], '^%d+$') then
    return { INVALID_ARGUMENTS }
  end
end
if redis.call('GET', KEYS[2]) ~= 'loading' then
  return { UNCHANGED }
end
for i = 3, #ARGV, 2 do
  if redis.call('HEXISTS', KEYS[3], ARGV[i]) == 0 and not redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    redis.call('ZADD', KEYS[1], ARGV[i + 1], ARGV[i])
  end
end
local recent = redis.call('HGETALL', KEYS[3])
for i = 1, #recent, 2 do
  -- Records are 'epoch:micros:state:ms[:committed]'; the count of pending ones ('pending') matches none.
  local state, at = string.match(recent[i + 1], '^%d+:%d+:(%d):(%d+)')
  local raw = redis.call('ZSCORE', KEYS[1], recent[i])
  local score = raw and tonumber(raw)
  if state == '1' and not (score and score > tonumber(at)) then
    redis.call('ZADD', KEYS[1], at, recent[i])
  elseif state == '0' and not (score and score > tonumber(at)) then
    redis.call('ZREM', KEYS[1], recent[i])
  end
end
redis.call('SET', KEYS[2], stampedHorizon(ARGV[2]))
trimList(KEYS[1], KEYS[2], capacity)
keepList(KEYS[1], KEYS[2])
return { APPLIED }
