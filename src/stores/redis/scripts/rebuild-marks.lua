#!lua flags=no-writes,allow-cross-slot-keys
--[[
  The versions and rebuild marks of many targets (the version each last stamped,
  its epoch and its rebuild's snapshot mark), read for a persist batch in one call
  per node (src/stores/redis/per-node.ts) rather than one HMGET per target.

  Input:
    KEYS[1..]    counters: counter hash of each target: KEYS, or on a cluster KEYS[1] and
                 then every ARGV
    ARGV[1..]    moreCounters: on a cluster, the counter hashes after KEYS[1]; none otherwise

  Output:
    { UNCHANGED, text }  per target, in order and separated by ';': 'epoch:micros:mark'
                         (mark '' when never rebuilt, or rebuilt before marks), or ''
                         when Redis does not hold it
]]
--@include statuses
--@include hash-fields

local marks = {}
local function markOf(key)
  local held = redis.call('HMGET', key, epochField, versionField, snapshotMarkField)
  if not held[1] and not held[2] and redis.call('EXISTS', key) == 0 then
    return ''
  end
  return (held[1] or '0') .. ':' .. (held[2] or '0') .. ':' .. (held[3] or '')
end
for i = 1, #KEYS do
  marks[#marks + 1] = markOf(KEYS[i])
end
for i = 1, #ARGV do
  marks[#marks + 1] = markOf(ARGV[i])
end
return { UNCHANGED, table.concat(marks, ';') }
