#!lua flags=allow-cross-slot-keys
--[[
  Sets counters PostgreSQL derives (a post's comments, a comment's replies, a
  user's posts, likes and collects received, following) to the values it
  committed, for every target a persist batch credits in one call per node
  (src/stores/redis/per-node.ts). Each value comes with the sequence number of
  its write (counters.seq, which grows under the row's lock, so in commit
  order), kept in the field 's:<counter>': a value is taken only with a
  sequence number at least as high as the one held, so a repeated or late
  write cannot move a counter twice or backwards, and the stores agree once the
  latest write arrived. A value that moved is announced to live subscribers as
  a like is (includes/append-event.lua).

  A missing hash stays missing: creating it here would hold these counters
  alone and make the target look known with every other count at zero.

  Input:
    KEYS[1..n]   counters: counter hash of each target: KEYS, or on a cluster KEYS[1] and
                 then the ARGV after the triples
    ARGV[1]      targetCount: n, the number of targets
    ARGV[2..n+1] tripleCounts: t_i, how many triples target i has (at least one)
    then         the triples of target 1, then of target 2, …: counter, value,
                 sequence number

  Output:
    { APPLIED, absent }      every value at least as new as the one held is set;
                             absent: how many targets Redis does not hold (nothing
                             written to those)
    { INVALID_ARGUMENTS }
]]
--@include statuses
--@include hash-fields
--@include node-call

local counts, triples = itemSizes(1)
if not counts then
  return { INVALID_ARGUMENTS }
end
local n = #counts
local first = 2 + n
local named = first + 3 * triples
if #ARGV ~= named - 1 + n - #KEYS or #KEYS < 1 then
  return { INVALID_ARGUMENTS }
end
for i = first, named - 1, 3 do
  if ARGV[i] == '' or not string.match(ARGV[i + 1], '^-?%d+$') or not string.match(ARGV[i + 2], '^%d+$') then
    return { INVALID_ARGUMENTS }
  end
end

local absent = 0
local at = first
for i = 1, n do
  local key = nodeKey(i, named)
  local last = at + 3 * counts[i] - 1
  if redis.call('EXISTS', key) == 0 then
    absent = absent + 1
  else
    local moved = false
    for j = at, last, 3 do
      local seqField = seqFieldPrefix .. ARGV[j]
      local held = redis.call('HMGET', key, seqField, ARGV[j])
      if tonumber(ARGV[j + 2]) >= tonumber(held[1] or '-1') then
        moved = moved or held[2] ~= ARGV[j + 1]
        redis.call('HSET', key, ARGV[j], ARGV[j + 1], seqField, ARGV[j + 2])
      end
    end
    if moved then
      redis.pcall('SPUBLISH', key, '')
    end
  end
  at = last + 1
end
return { APPLIED, absent }
