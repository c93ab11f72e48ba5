#!lua flags=allow-cross-slot-keys
--[[
  Removes from users' pending records (includes/member-index.lua) the likes
  PostgreSQL has now committed: a target whose recorded like is not newer than
  the change of the pair PostgreSQL committed (the like itself, or a later
  unlike that superseded it). A newer like of the same target stays, whatever
  order batches commit in.

  Input:
    KEYS[1..n]   pendingRecords: each a user's pending record
    ARGV[1..3n]  committedChanges: three per key, for KEYS[i] at ARGV[3i-2..3i]: a target of its record
                 PostgreSQL committed a change of, that change's epoch, and its microseconds

  Output:
    { APPLIED, removed }
    { INVALID_ARGUMENTS }
]]
--@include statuses

if #ARGV ~= 3 * #KEYS then
  return { INVALID_ARGUMENTS }
end
local removed = 0
for i = 1, #KEYS do
  local target, epoch, micros = ARGV[3 * i - 2], tonumber(ARGV[3 * i - 1]), tonumber(ARGV[3 * i])
  if not epoch or not micros then
    return { INVALID_ARGUMENTS }
  end
  local noted = redis.call('HGET', KEYS[i], target)
  if noted then
    local e, m = string.match(noted, '^(%d+):(%d+)$')
    e, m = tonumber(e), tonumber(m)
    if not e or e < epoch or (e == epoch and m <= micros) then
      removed = removed + redis.call('HDEL', KEYS[i], target)
    end
  end
end
return { APPLIED, removed }
