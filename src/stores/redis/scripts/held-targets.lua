#!lua flags=no-writes,allow-cross-slot-keys
--[[
  Whether Redis holds each of many targets, and from which replication history
  (includes/history.lua), for a load: in one call per node
  (src/stores/redis/per-node.ts) rather than one command per target.

  Input:
    KEYS[1..]    counters: counter hash of each target: KEYS, or on a cluster KEYS[1] and
                 then every ARGV
    ARGV[1..]    moreCounters: on a cluster, the counter hashes after KEYS[1]; none otherwise

  Output:
    { UNCHANGED, text }  per target, in order and separated by ';': '1' held in this
                         node's history, '0' not held, or 'epoch:micros:history' when held
                         from another history (suspect: a failover, a restart or a slot's
                         move brought it here): the version it last stamped, and the
                         node's history now
]]
--@include statuses
--@include history

local states = {}
local function stateOf(key)
  local held = redis.call('HMGET', key, historyField, epochField, versionField)
  if held[1] and trustedHistory(held[1]) then
    return '1'
  end
  -- A hash without a history was loaded before histories were stamped: suspect too.
  if not held[1] and redis.call('EXISTS', key) == 0 then
    return '0'
  end
  return (held[2] or '0') .. ':' .. (held[3] or '0') .. ':' .. nodeHistory()
end
for i = 1, #KEYS do
  states[#states + 1] = stateOf(KEYS[i])
end
for i = 1, #ARGV do
  states[#states + 1] = stateOf(ARGV[i])
end
return { UNCHANGED, table.concat(states, ';') }
