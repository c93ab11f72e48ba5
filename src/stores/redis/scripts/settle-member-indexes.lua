#!lua flags=allow-cross-slot-keys
--[[
  Gives member indexes held for likes not yet persisted (includes/member-index.lua,
  holdIndex) their idle expiry back, once PostgreSQL committed a change of the
  index's user at least as new as the like that holds it. An index held by a
  newer like, still on its way, stays held.

  Input:
    KEYS[1..n]   member indexes
    ARGV[i]      for KEYS[i], the time (ms, as versions stamp it) of the newest change of the
                 index's user and relation PostgreSQL just committed

  Output:
    { APPLIED, settled }   settled: how many indexes got their idle expiry back
    { INVALID_ARGUMENTS }
]]
--@include statuses
--@include member-index

if #ARGV ~= #KEYS then
  return { INVALID_ARGUMENTS }
end
local settled = 0
for i = 1, #KEYS do
  local committed = tonumber(ARGV[i])
  if not committed then
    return { INVALID_ARGUMENTS }
  end
  local at = redis.call('PEXPIRETIME', KEYS[i])
  if at > indexPendingOffset and at - indexPendingOffset <= committed then
    redis.call('PEXPIRE', KEYS[i], indexIdleMs)
    settled = settled + 1
  end
end
return { APPLIED, settled }
