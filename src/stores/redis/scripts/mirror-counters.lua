--[[
  Sets counters PostgreSQL derives (a post's comments, a comment's replies, a
  user's posts, likes and collects received, following) to the values it
  committed. Each value comes with the sequence number of its write (counters.seq,
  which grows under the row's lock, so in commit order), kept in the field
  's:<counter>': a value is taken only with a sequence number at least as high
  as the one held, so a repeated or late write cannot move a counter twice or
  backwards, and the stores agree once the latest write arrived. A value that
  moved is announced to live subscribers as a like is (includes/append-event.lua).

  A missing hash stays missing: creating it here would hold these counters
  alone and make the target look known with every other count at zero.

  Input:
    KEYS[1]      counter hash of the target
    ARGV         counter, value, sequence number, counter, value, … (at least one triple)

  Output:
    { APPLIED }              every value at least as new as the one held is set
    { TARGET_ABSENT }        the hash is not in Redis (nothing written)
    { INVALID_ARGUMENTS }
]]
--@include statuses
--@include hash-fields

local n = #ARGV
if n == 0 or n % 3 ~= 0 then
  return { INVALID_ARGUMENTS }
end
for i = 1, n, 3 do
  if ARGV[i] == '' or not string.match(ARGV[i + 1], '^-?%d+$') or not string.match(ARGV[i + 2], '^%d+$') then
    return { INVALID_ARGUMENTS }
  end
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return { TARGET_ABSENT }
end
local moved = false
for i = 1, n, 3 do
  local seqField = seqFieldPrefix .. ARGV[i]
  local held = tonumber(redis.call('HGET', KEYS[1], seqField) or '-1')
  if tonumber(ARGV[i + 2]) >= held then
    moved = moved or redis.call('HGET', KEYS[1], ARGV[i]) ~= ARGV[i + 1]
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1], seqField, ARGV[i + 2])
  end
end
if moved then
  redis.pcall('SPUBLISH', KEYS[1], '')
end
return { APPLIED }
