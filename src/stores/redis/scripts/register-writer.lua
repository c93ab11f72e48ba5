--[[
  Registers a process that writes, or renews its lease, in the writers' registry
  (includes/writer-fence.lua), and tells it the fence's generation.

  Input:
    KEYS[1]   the writers' registry
    ARGV[1]   the process's id
    ARGV[2]   its protocol: how its version notes memberships in member indexes
    ARGV[3]   its lease, in milliseconds: how long it counts as writing without renewing
    ARGV[4]   1 to leave the registry (a process stopping), else 0

  Output:
    { APPLIED, generation, mixed, moved }
      generation: the fence's generation now; mixed: 1 when writers of several protocols run
      (no index completes meanwhile); moved: 1 when this call moved the generation while
      other writers run (they learn it at their next renewal)
    { INVALID_ARGUMENTS }
]]
--@include statuses
--@include writer-fence

local registry = KEYS[1]
local id, protocol, leaseMs, leaving = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
if not id or id == '' or not protocol or not string.match(protocol, '^%d+$') or not leaseMs or leaseMs < 1 or (leaving ~= '0' and leaving ~= '1') then
  return { INVALID_ARGUMENTS }
end
if leaving == '1' then
  redis.call('HDEL', registry, 'w:' .. id)
  return { APPLIED, tonumber(redis.call('HGET', registry, 'g') or '0'), 0, 0 }
end
local others = 0
for _ in pairs(liveProtocols(registry)) do
  others = others + 1
end
redis.call('HSET', registry, 'w:' .. id, protocol .. ':' .. string.format('%.0f', nowMs() + leaseMs))
local live = liveProtocols(registry)
local known = {}
for p in string.gmatch(redis.call('HGET', registry, 'p') or '', '%d+') do
  known[p] = true
end
local moved = 0
if not known[protocol] then
  redis.call('HINCRBY', registry, 'g', 1)
  if others > 0 then
    moved = 1
  end
end
local protocols = {}
for p in pairs(live) do
  protocols[#protocols + 1] = p
end
table.sort(protocols)
redis.call('HSET', registry, 'p', table.concat(protocols, ','))
return { APPLIED, tonumber(redis.call('HGET', registry, 'g')), #protocols > 1 and 1 or 0, moved }
