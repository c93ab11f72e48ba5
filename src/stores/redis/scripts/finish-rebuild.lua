--[[
  Completes a rebuild from PostgreSQL: creates the counter hash, which marks the
  target ready, after the caller wrote its membership shards. Does nothing if
  the hash appeared meanwhile, nor when the caller's rebuild lock expired (its
  lease is the longest a rebuild may take: another process may be rebuilding
  the target from a newer snapshot). Stamps 'rb' with the rebuild time and 'rh'
  with the node's replication history (includes/history.lua).

  Input:
    KEYS[1]      counters: counter hash of the target
    KEYS[2]      lock: the target's rebuild lock
    KEYS[3]      droppedVersion: where a drop of the target left its last version: done with once the target is back
    ARGV[1]      token: the caller's lock token
    ARGV[2..]    fieldsAndValues: field, value, field, value, ... (at least one pair, numeric values)

  Output:
    { APPLIED }              created
    { UNCHANGED }            it already existed (left untouched)
    { LOCK_LOST }            the lock is not the caller's any more; nothing written
    { INVALID_ARGUMENTS }
]]
--@include statuses
--@include hash-fields
--@include check-counter-fields
--@include history

local fields = { unpack(ARGV, 2) }
if not areCounterFields(fields) then
  return { INVALID_ARGUMENTS }
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return { UNCHANGED }
end
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return { LOCK_LOST }
end
local now = redis.call('TIME')
redis.call('HSET', KEYS[1], rebuiltAtField, string.format('%.0f', tonumber(now[1]) * 1000000 + tonumber(now[2])), historyField, nodeHistory(), unpack(fields))
redis.call('DEL', KEYS[3])
return { APPLIED }
