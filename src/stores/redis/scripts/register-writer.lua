--[[
  Registers a process that writes, or renews its lease, in the writers' registry
  (includes/writer-fence.lua), and tells it the fence's generation.

  Input:
    KEYS[1]   writers: the writers' registry
    ARGV[1]   processId: the process's id
    ARGV[2]   protocol: its protocol: how its version notes memberships in member indexes
    ARGV[3]   leaseMs: its lease, in milliseconds: how long it counts as writing without renewing
    ARGV[4]   mode: 'renew'; 'leave' (a process stopping); or 'ask', which only answers, with
              how many other live writers have not learned the generation yet
    ARGV[5]   quietMs: how long after a protocol leaves no index completes, in milliseconds

  Output:
    { APPLIED, generation, mixed, moved }
      generation: the fence's generation now (0 before any); mixed: 1 when writers of several
      protocols run (no index completes meanwhile); moved: 1 when this call moved the generation
      while other writers run (they learn it at their next renewal); after 'ask', how many of
      them have not yet
    { INVALID_ARGUMENTS }
]]
--@include statuses
--@include writer-fence

local registry = KEYS[1]
local id, protocol, leaseMs, mode, quietMs = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
if not id or id == '' or not protocol or not string.match(protocol, '^%d+$') or not leaseMs or leaseMs < 1
  or (mode ~= 'renew' and mode ~= 'leave' and mode ~= 'ask') or not quietMs or quietMs < 0 then
  return { INVALID_ARGUMENTS }
end
redis.call('HSET', registry, 'qm', string.format('%.0f', quietMs))
local generation = function()
  return tonumber(redis.call('HGET', registry, 'g') or '0')
end
if mode == 'leave' then
  redis.call('HDEL', registry, 'w:' .. id)
  liveProtocols(registry)
  return { APPLIED, generation(), 0, 0 }
elseif mode == 'ask' then
  local _, count, _, behind = liveProtocols(registry, id, generation())
  return { APPLIED, generation(), count > 1 and 1 or 0, behind }
end
local learned = function()
  redis.call('HSET', registry, 'w:' .. id, protocol .. ':' .. string.format('%.0f', nowMs() + leaseMs) .. ':' .. string.format('%.0f', generation()))
end
learned()
local live, count, others = liveProtocols(registry, id)
local moved = 0
local known, before = protocolsOf(redis.call('HGET', registry, 'p'))
if not known[protocol] then
  -- A time: never the same twice, whatever became of the registry before (a DEL, a restore).
  redis.call('HSET', registry, 'g', string.format('%.0f', math.max(nowMs(), generation() + 1)), 'p', listOf(live))
  if before > 0 then
    -- What the versions before acknowledged last reaches PostgreSQL first.
    redis.call('HSET', registry, 'q', string.format('%.0f', nowMs() + quietMs))
  end
  learned()
  if others > 0 then
    moved = 1
  end
end
return { APPLIED, generation(), count > 1 and 1 or 0, moved }
