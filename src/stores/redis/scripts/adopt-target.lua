--[[
  Takes a target held from another replication history (includes/history.lua)
  into this node's, once the caller found that PostgreSQL holds no change newer
  than the version it last stamped: the node then lacks nothing PostgreSQL has
  (a failover or an AOF loses a suffix of a target's changes, never one in the
  middle), as after a clean failover or a slot's move.

  Input:
    KEYS[1]      counters: counter hash of the target
    ARGV[1]      epoch: epoch the caller compared
    ARGV[2]      micros: microseconds the caller compared

  Output:
    { APPLIED }          stamped with this node's history
    { UNCHANGED }        already of this node's history
    { TARGET_ABSENT }    gone, or it stamped another version since: compare again
    { INVALID_ARGUMENTS }
]]
--@include statuses
--@include history

if not ARGV[1] or not ARGV[2] then
  return { INVALID_ARGUMENTS }
end
local held = redis.call('HMGET', KEYS[1], historyField, epochField, versionField)
if held[1] and trustedHistory(held[1]) then
  return { UNCHANGED }
end
if redis.call('EXISTS', KEYS[1]) == 0 or (held[2] or '0') ~= ARGV[1] or (held[3] or '0') ~= ARGV[2] then
  return { TARGET_ABSENT }
end
redis.call('HSET', KEYS[1], historyField, nodeHistory())
return { APPLIED }
