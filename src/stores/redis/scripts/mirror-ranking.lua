--[[
  Sets posts' values in one ranking of hotPosts (a time bucket's likes, or every
  post's like count) to what PostgreSQL committed, as absolute values, never as
  increments. Each value comes with the sequence number of its row's write
  (like_buckets.seq or counters.seq, both growing in commit order per row), kept
  per member in the seq hash: a value is taken only with a higher sequence number
  than the one held, so a resent, repeated or late write cannot move a member
  twice or backwards. A member at 0 (or below) leaves the ranking; its sequence
  number stays, so an older write cannot bring it back.

  Bounded: the ranking keeps its `capacity` highest members (ties: the lower id
  goes first, members being ids zero-padded to 20 digits); the sequence numbers
  of trimmed members go with them, and those of members that left at 0 are
  dropped once the hash holds twice the capacity.

  Input:
    KEYS[1]      ranking: the ranking (sorted set)
    KEYS[2]      seqs: its seq hash
    ARGV[1]      capacity: how many highest members the ranking keeps
    ARGV[2]      expireAtMs: when both keys expire, Unix ms (0: never)
    ARGV[3..]    triples: member, value, sequence number, member, … (at least one triple)

  Output:
    { APPLIED, values taken }
    { INVALID_ARGUMENTS }    nothing written
]]
--@include statuses

local n = #ARGV - 2
local capacity = tonumber(ARGV[1])
local expireAt = tonumber(ARGV[2])
if n <= 0 or n % 3 ~= 0 or not capacity or capacity < 1 or not expireAt or expireAt < 0 then
  return { INVALID_ARGUMENTS }
end
for i = 3, #ARGV, 3 do
  if not string.match(ARGV[i], '^%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d$') or not string.match(ARGV[i + 1], '^-?%d+$') or not string.match(ARGV[i + 2], '^%d+$') then
    return { INVALID_ARGUMENTS }
  end
end

local taken = 0
for i = 3, #ARGV, 3 do
  local member, value, seq = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  local held = tonumber(redis.call('HGET', KEYS[2], member) or '-1')
  if seq > held then
    redis.call('HSET', KEYS[2], member, ARGV[i + 2])
    if value > 0 then
      redis.call('ZADD', KEYS[1], value, member)
    else
      redis.call('ZREM', KEYS[1], member)
    end
    taken = taken + 1
  end
end

local excess = redis.call('ZCARD', KEYS[1]) - capacity
if excess > 0 then
  local trimmed = redis.call('ZRANGE', KEYS[1], 0, excess - 1)
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, excess - 1)
  for i = 1, #trimmed, 1000 do
    redis.call('HDEL', KEYS[2], unpack(trimmed, i, math.min(i + 999, #trimmed)))
  end
end
if redis.call('HLEN', KEYS[2]) > 2 * capacity then
  for _, member in ipairs(redis.call('HKEYS', KEYS[2])) do
    if not redis.call('ZSCORE', KEYS[1], member) then
      redis.call('HDEL', KEYS[2], member)
    end
  end
end
if expireAt > 0 then
  redis.call('PEXPIREAT', KEYS[1], expireAt)
  redis.call('PEXPIREAT', KEYS[2], expireAt)
end
return { APPLIED, taken }
