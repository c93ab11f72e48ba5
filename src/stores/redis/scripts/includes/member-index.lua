--[[
  A user's member index (keys.ts, um:): the ids of the targets of one type the
  user joined in one relation, kept in the user's slot so a feed learns which of
  its targets the viewer may have joined with one SMISMEMBER, rather than one
  SISMEMBER in each target's shards (half of Redis's work per feed of 100 posts).

  It holds a superset of the user's memberships. Each add of a member notes its
  target in the same script (add-member.lua, and replay-change.lua for a change
  replayed into a rebuilt target); a removal leaves it there, since a target
  noted is only ever looked up exactly; a load from PostgreSQL
  (begin-member-index.lua, then complete-member-index.lua) adds every membership
  PostgreSQL holds and marks the index complete; a target rebuilt from PostgreSQL
  notes its members in the indexes that exist (note-members.lua), which includes
  every index being loaded. Only a complete index may answer "not a
  member". One that reaches its capacity is marked overflowed and answers nothing
  again: its user's memberships are looked up target by target, as without one.
  A member index lives in the user's slot, which a like's script cannot reach on
  a cluster, so only a standalone Redis keeps them.

  An index expires once unused for `indexIdleMs` (member-index-store.ts's
  memberIndexIdleMs, kept equal by a unit test): every note of a target, load and
  read sets its expiry anew; gone (or deleted by the memory policy near maxmemory),
  it is loaded again from PostgreSQL on its next read. That load would miss a
  like PostgreSQL does not hold yet, so each like also records its target in the
  user's pending record (keys.ts, up:), a hash of target to the like's version,
  which no expiry takes: a load adds what it holds (complete-member-index.lua),
  and the persist consumer removes each target once PostgreSQL committed that
  like or a later change of the pair (settle-member-indexes.lua).
]]

local indexComplete = '0'
local indexOverflowed = '-1'
-- Makes the index exist while it loads (begin-member-index.lua); complete-member-index.lua removes it.
local indexLoading = '-2'
-- How long an index lives unused: 7 days.
local indexIdleMs = 604800000

-- Notes a target the user just joined in their index (KEYS-free: the key is the caller's),
-- and sets its expiry anew.
local function noteJoined(index, capacity, targetId)
  if redis.call('SCARD', index) < capacity then
    redis.call('SADD', index, targetId)
  else
    redis.call('SADD', index, indexOverflowed)
  end
  redis.call('PEXPIRE', index, indexIdleMs)
end

-- Records a like of `targetId` not yet persisted, at version epoch:micros, in the user's pending record.
local function notePending(pending, targetId, epoch, micros)
  redis.call('HSET', pending, targetId, string.format('%.0f:%.0f', tonumber(epoch), micros))
end
