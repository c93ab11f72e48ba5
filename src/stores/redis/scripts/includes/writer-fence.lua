--[[
  The writers' registry (src/stores/redis/index-fence.ts): one hash naming every
  process that writes, with the protocol of its version (how it notes memberships
  in member indexes) and until when its lease runs, in milliseconds of Redis's
  clock ('w:<process>' = '<protocol>:<until>'); the fence's generation ('g'), and
  the protocols running when it last moved ('p', comma-separated). The generation
  moves when a process of a protocol not among those starts: every index completed
  before answers nothing after (includes/member-index.lua).
]]
--@include clock

local function nowMs()
  return math.floor(clockMicros() / 1000)
end

-- The protocols of the writers whose lease runs, as a set; expired writers are taken out.
local function liveProtocols(registry)
  local now = nowMs()
  local fields = redis.call('HGETALL', registry)
  local live = {}
  for i = 1, #fields, 2 do
    local name, value = fields[i], fields[i + 1]
    if string.sub(name, 1, 2) == 'w:' then
      local protocol, untilMs = string.match(value, '^(%d+):(%d+)$')
      if protocol and tonumber(untilMs) >= now then
        live[protocol] = true
      else
        redis.call('HDEL', registry, name)
      end
    end
  end
  return live
end

-- Whether an index may complete for a writer of `protocol` who knows `generation`: the
-- generation is the registry's, and every live writer is of that protocol.
local function fenceOpen(registry, protocol, generation)
  if tonumber(redis.call('HGET', registry, 'g') or '0') ~= generation then
    return false
  end
  for other in pairs(liveProtocols(registry)) do
    if other ~= protocol then
      return false
    end
  end
  return true
end
