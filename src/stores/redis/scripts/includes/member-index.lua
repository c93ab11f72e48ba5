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
  memberIndexIdleMs, kept equal by a unit test); gone, it is loaded again from
  PostgreSQL on its next read. It must never go while it holds a membership
  PostgreSQL lacks, which that load would miss: a like noting its target holds
  the index (holdIndex: its expiry moves `indexPendingOffset` ms past the like's
  time, so far ahead it also says which like), and the persist consumer gives it
  back its idle expiry once PostgreSQL committed that like or a later change of
  the user (settle-member-indexes.lua). Everything else that uses the index
  (reads, loads, notes of memberships PostgreSQL holds) only moves an idle expiry
  later (keepIndex), never a held one.
]]

local indexComplete = '0'
local indexOverflowed = '-1'
-- Makes the index exist while it loads (begin-member-index.lua); complete-member-index.lua removes it.
local indexLoading = '-2'
-- How long an index lives unused: 7 days.
local indexIdleMs = 604800000
-- Added to a like's time (ms) to hold the index: far past any idle expiry, so an expiry above it is a hold.
local indexPendingOffset = 10000000000000

-- Notes a target the user just joined in their index (KEYS-free: the key is the caller's);
-- answers whether the index is new (this note made it).
local function noteJoined(index, capacity, targetId)
  local size = redis.call('SCARD', index)
  if size < capacity then
    redis.call('SADD', index, targetId)
  else
    redis.call('SADD', index, indexOverflowed)
  end
  return size == 0
end

-- Holds the index for a like made at `micros` not yet persisted: it expires no sooner
-- than the consumer settles that like, or a later one (never moved back to an earlier
-- like). `new`: noteJoined just made the index (no expiry yet, which GT would leave so).
-- An index from before expiries keeps having none until a read gives it one.
local function holdIndex(index, micros, new)
  local at = math.floor(micros / 1000) + indexPendingOffset
  if new then
    redis.call('PEXPIREAT', index, at)
  else
    redis.call('PEXPIREAT', index, at, 'GT')
  end
end

-- Moves an idle index's expiry to `indexIdleMs` from now; a held one (a like not yet
-- persisted) keeps its hold, and one without an expiry (from before expiries) gets one.
local function keepIndex(index)
  redis.call('PEXPIRE', index, indexIdleMs, 'GT')
  redis.call('PEXPIRE', index, indexIdleMs, 'NX')
end
