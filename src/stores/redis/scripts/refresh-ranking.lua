--[[
  Makes each window's ranking of hotPosts the sum of its current time buckets,
  its `capacity` highest posts kept. Idempotent: any number of workers may run it,
  in any order, as often as they like. Buckets that left every window expire on
  their own (mirror-ranking.lua sets their expiry when it writes them).

  The marker says the buckets were rebuilt from PostgreSQL since Redis last lost
  them: without it (a flush, a new server) the buckets hold only what was mirrored
  since, so nothing is summed and the caller rebuilds first.

  Input:
    KEYS[1]      marker: the marker of a rebuilt ranking
    KEYS[2]      hourRanking: the ranking of the window HOUR
    KEYS[3]      dayRanking: the ranking of the window DAY
    KEYS[4]      weekRanking: the ranking of the window WEEK
    KEYS[5..]    buckets: the buckets of HOUR (ARGV[2] of them), then of DAY (ARGV[3]), then of WEEK (ARGV[4])
    ARGV[1]      capacity: how many posts each ranking keeps
    ARGV[2]      hourBuckets: how many buckets of HOUR follow KEYS[4]
    ARGV[3]      dayBuckets: how many of DAY follow those
    ARGV[4]      weekBuckets: how many of WEEK follow those

  Output:
    { APPLIED }
    { TARGET_ABSENT }        the marker is gone: rebuild, then refresh (nothing written)
    { INVALID_ARGUMENTS }
]]
--@include statuses

local capacity = tonumber(ARGV[1])
local counts = { tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]) }
if not capacity or capacity < 1 or not counts[1] or not counts[2] or not counts[3] or #KEYS ~= 4 + counts[1] + counts[2] + counts[3] then
  return { INVALID_ARGUMENTS }
end
for w = 1, 3 do
  if counts[w] < 1 then
    return { INVALID_ARGUMENTS }
  end
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return { TARGET_ABSENT }
end

local at = 5
for w = 1, 3 do
  local window = KEYS[1 + w]
  local buckets = {}
  for i = at, at + counts[w] - 1 do
    buckets[#buckets + 1] = KEYS[i]
  end
  at = at + counts[w]
  redis.call('ZUNIONSTORE', window, #buckets, unpack(buckets))
  local excess = redis.call('ZCARD', window) - capacity
  if excess > 0 then
    redis.call('ZREMRANGEBYRANK', window, 0, excess - 1)
  end
end
return { APPLIED }
