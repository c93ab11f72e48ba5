#!lua flags=allow-cross-slot-keys
--[[
  Deletes member indexes to free memory (the service's memory policy, near
  maxmemory), except those held for a like not yet persisted
  (includes/member-index.lua, holdIndex): an index that is not held holds only
  memberships PostgreSQL has, so its next read loads it back whole.

  Input:
    KEYS[1..n]   member indexes

  Output:
    { APPLIED, deleted }
]]
--@include statuses
--@include member-index

local deleted = 0
for i = 1, #KEYS do
  if redis.call('PEXPIRETIME', KEYS[i]) <= indexPendingOffset then
    deleted = deleted + redis.call('DEL', KEYS[i])
  end
end
return { APPLIED, deleted }
