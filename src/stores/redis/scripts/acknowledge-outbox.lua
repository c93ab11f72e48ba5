#!lua flags=allow-cross-slot-keys
--[[
  Acknowledges and deletes relayed entries of many outbox streams in one call
  per node (src/stores/redis/per-node.ts): a relay round touches hundreds of
  streams, and two commands from the client for each cost the relay more than
  the round's publish.

  Input:
    KEYS[1..]     streams: KEYS, or on a cluster KEYS[1] and then the ARGV
                  after the entry ids
    ARGV[1]       group: the consumer group
    ARGV[2]       streamCount: n, the number of streams
    ARGV[3..2+n]  entryCounts: e_i, how many entries of stream i (at least one)
    then          the entry ids of stream 1, then of stream 2, …

  Output:
    { APPLIED }
    { INVALID_ARGUMENTS }
]]
--@include statuses
--@include node-call

local group = ARGV[1]
local counts, ids = itemSizes(2)
if not group or group == '' or not counts then
  return { INVALID_ARGUMENTS }
end
local n = #counts
local first = 3 + n
local named = first + ids
if #KEYS < 1 or #ARGV ~= named - 1 + n - #KEYS then
  return { INVALID_ARGUMENTS }
end

local at = first
for i = 1, n do
  local stream = nodeKey(i, named)
  local last = at + counts[i] - 1
  redis.call('XACK', stream, group, unpack(ARGV, at, last))
  redis.call('XDEL', stream, unpack(ARGV, at, last))
  at = last + 1
end
return { APPLIED }
