--[[
  A user's member index (keys.ts, um:): the ids of the targets of one type the
  user joined in one relation, kept in the user's slot so a feed learns which of
  its targets the viewer may have joined with one SMISMEMBER, rather than one
  SISMEMBER in each target's shards (half of Redis's work per feed of 100 posts).

  It holds a superset of the user's memberships. Each add of a member notes its
  target in the index, where it exists, in the same script (add-member.lua;
  replay-change.lua notes a change replayed into a rebuilt target, making the
  index if need be); a removal leaves it there, since a target
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
  memberIndexIdleMs, kept equal by a unit test): every load and read sets its
  expiry anew; gone (or deleted by the memory policy near maxmemory),
  it is loaded again from PostgreSQL on its next read. That load would miss a
  like PostgreSQL does not hold yet, so each like also records its target in the
  user's pending record (keys.ts, up:), a hash of target to the like's version,
  which no expiry takes: a load adds what it holds (complete-member-index.lua),
  and the persist consumer removes each target once PostgreSQL committed that
  like or a later change of the pair (settle-member-indexes.lua).
  An index completes in its node's replication history (includes/history.lua),
  which it notes as a mark of its own: on a node of another history (a failover
  or restart may have taken notes back) it answers nothing until loaded again,
  which adds what PostgreSQL holds to what it kept. The mark also carries the
  writers' fence generation (src/stores/redis/index-fence.ts), which changes
  when processes that note indexes another way (another version) start: an
  index completed before answers nothing after, as they may not have noted in it.
]]
--@include history

local indexComplete = '0'
local indexOverflowed = '-1'
-- Makes the index exist while it loads (begin-member-index.lua); complete-member-index.lua removes it.
local indexLoading = '-2'
-- The mark of a load completed in this node's replication history under the fence's
-- `generation` (an integer below -2): the history's top 32 bits, then 20 of the generation
-- (a time in ms), exact in a double.
local function indexHistoryMark(generation)
  local history = -tonumber(nodeHistory()) - 3
  return string.format('-%.0f', math.floor(history / 1048576) * 1048576 + generation % 1048576 + 3)
end
-- How long an index lives unused: 7 days.
local indexIdleMs = 604800000

-- Adds a target to an index of `size` members, or marks it overflowed at its capacity.
local function addNote(index, size, capacity, targetId)
  if size < capacity then
    redis.call('SADD', index, targetId)
  else
    redis.call('SADD', index, indexOverflowed)
  end
end

-- Notes a target the user just joined in their index, where it exists (KEYS-free: the key
-- is the caller's; every index holds a mark, so an empty one is absent): an absent index is
-- loaded from PostgreSQL and the pending record on its next read. Its expiry stays as its
-- last load or read set it: an index lives for reads, and a PEXPIRE here was a command
-- more per like against the like's budget (DESIGN §3c).
local function noteJoined(index, capacity, targetId)
  local size = redis.call('SCARD', index)
  if size > 0 then
    addNote(index, size, capacity, targetId)
  end
end

-- Notes a replayed join whether or not the index exists, and sets its expiry: Redis may
-- have lost the join's pending record with its last writes, and PostgreSQL may not hold
-- it yet, but a later load keeps what the index holds (begin-member-index.lua).
local function noteReplayed(index, capacity, targetId)
  addNote(index, redis.call('SCARD', index), capacity, targetId)
  redis.call('PEXPIRE', index, indexIdleMs)
end

-- Records a like of `targetId` not yet persisted, at version epoch:micros, in the user's pending record.
local function notePending(pending, targetId, epoch, micros)
  redis.call('HSET', pending, targetId, string.format('%.0f:%.0f', tonumber(epoch), micros))
end
