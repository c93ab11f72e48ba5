--[[
  Begins the load of a user's member index (includes/member-index.lua) before
  PostgreSQL is read: from now on the index exists, so a target rebuilt from
  PostgreSQL meanwhile notes its memberships in it (note-members.lua) even when
  PostgreSQL committed them after the load's read.

  Input:
    KEYS[1]   index: the member index

  Output:
    { APPLIED }
]]
--@include statuses
--@include member-index

redis.call('SADD', KEYS[1], indexLoading)
redis.call('PEXPIRE', KEYS[1], indexIdleMs)
return { APPLIED }
