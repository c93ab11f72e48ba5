#!lua flags=no-writes,allow-cross-slot-keys
--[[
  The entries of many outbox streams together, in one call per node
  (src/stores/redis/per-node.ts) rather than one XLEN per stream: the client's
  cost per command made a check of 1,024 streams cost more than a batch of likes.

  Input:
    KEYS[1..]    streams: KEYS, or on a cluster KEYS[1] and then every ARGV
    ARGV[1..]    moreStreams: on a cluster, the streams after KEYS[1]; none otherwise

  Output:
    { UNCHANGED, entries }
]]
--@include statuses

local total = 0
for i = 1, #KEYS do
  total = total + redis.call('XLEN', KEYS[i])
end
for i = 1, #ARGV do
  total = total + redis.call('XLEN', ARGV[i])
end
return { UNCHANGED, total }
