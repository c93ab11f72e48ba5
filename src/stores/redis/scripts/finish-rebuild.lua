--[[
  Completes a rebuild from PostgreSQL: creates the counter hash, which marks the
  target ready, after the caller wrote its membership shards. Does nothing if
  the hash appeared meanwhile. Stamps 'rb' with the rebuild time.

  Input:
    KEYS[1]      counter hash of the target
    ARGV         field, value, field, value, ... (at least one pair, numeric values)

  Output:
    { APPLIED }              created
    { UNCHANGED }            it already existed (left untouched)
    { INVALID_ARGUMENTS }
]]
--@include statuses
--@include hash-fields
--@include check-counter-fields

if not areCounterFields(ARGV) then
  return { INVALID_ARGUMENTS }
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return { UNCHANGED }
end
local now = redis.call('TIME')
redis.call('HSET', KEYS[1], rebuiltAtField, string.format('%.0f', tonumber(now[1]) * 1000000 + tonumber(now[2])), unpack(ARGV))
return { APPLIED }
