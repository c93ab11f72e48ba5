#!lua flags=no-writes,allow-cross-slot-keys
--[[
  The rebuild marks of many targets (their epoch and snapshot mark), read for a
  persist batch in one call per node (src/stores/redis/per-node.ts) rather than
  one HMGET per target.

  Input:
    keys         counter hash of each target: KEYS, or on a cluster KEYS[1] and
                 then every ARGV

  Output:
    { UNCHANGED, text }  per target, in order and separated by ';': 'epoch:mark',
                         or '' when the hash has no epoch or no mark
]]
--@include statuses
--@include hash-fields

local marks = {}
local function markOf(key)
  local held = redis.call('HMGET', key, epochField, snapshotMarkField)
  if held[1] and held[2] then
    return held[1] .. ':' .. held[2]
  end
  return ''
end
for i = 1, #KEYS do
  marks[#marks + 1] = markOf(KEYS[i])
end
for i = 1, #ARGV do
  marks[#marks + 1] = markOf(ARGV[i])
end
return { UNCHANGED, table.concat(marks, ';') }
