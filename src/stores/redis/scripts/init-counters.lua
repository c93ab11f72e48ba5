--[[
  Creates a target's counter hash unless it exists, marking the target one
  Redis holds, stamped with the node's replication history (includes/history.lua).

  Input:
    KEYS[1]      counters: counter hash of the target
    ARGV[1..]    fieldsAndValues: field, value, field, value, ... (at least one pair, numeric values)

  Output:
    { APPLIED }              created
    { UNCHANGED }            it already existed (left untouched)
    { INVALID_ARGUMENTS }
]]
--@include statuses
--@include check-counter-fields
--@include history

if not areCounterFields(ARGV) then
  return { INVALID_ARGUMENTS }
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return { UNCHANGED }
end
redis.call('HSET', KEYS[1], historyField, nodeHistory(), unpack(ARGV))
return { APPLIED }
