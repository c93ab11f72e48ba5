--[[
  The writers' registry (src/stores/redis/index-fence.ts): one hash naming every
  process that writes, with the protocol of its version (how it notes memberships
  in member indexes) and until when its lease runs, in milliseconds of Redis's
  clock, and the generation it last learned ('w:<process>' = '<protocol>:<until>:<generation>');
  the fence's generation ('g'); the
  protocols that may have noted in indexes of that generation ('p', comma-separated:
  those running since it moved, narrowed to the live ones when some leave, kept
  when all do); and until when no index completes ('q', ms), the pipeline's time to
  commit what a version that left acknowledged ('qm', ms, as the writers registered it). The generation moves, to the time
  in ms, when a process of a protocol not among 'p' starts: every index completed
  before answers nothing after (includes/member-index.lua).
]]
--@include clock

-- How long after a protocol leaves no index completes, as the writers registered it: its last likes reach PostgreSQL meanwhile.
local function fenceQuietMs(registry)
  return tonumber(redis.call('HGET', registry, 'qm') or '10000')
end

local function nowMs()
  return math.floor(clockMicros() / 1000)
end

local function protocolsOf(text)
  local set, count = {}, 0
  for p in string.gmatch(text or '', '%d+') do
    set[p] = true
    count = count + 1
  end
  return set, count
end

local function listOf(set)
  local list = {}
  for p in pairs(set) do
    list[#list + 1] = p
  end
  table.sort(list)
  return table.concat(list, ',')
end

-- The protocols of the writers whose lease runs, as a set; how many; how many writers other
-- than `except` (a process id) run; and how many of those have not learned the generation
-- `generation`. Expired writers are taken out, and 'p' narrowed to the live protocols when
-- some left (but not when all did).
local function liveProtocols(registry, except, generation)
  local now = nowMs()
  local fields = redis.call('HGETALL', registry)
  local live, count, others, behind = {}, 0, 0, 0
  for i = 1, #fields, 2 do
    local name, value = fields[i], fields[i + 1]
    if string.sub(name, 1, 2) == 'w:' then
      local protocol, untilMs, learned = string.match(value, '^(%d+):(%d+):(%d+)$')
      if protocol and tonumber(untilMs) >= now then
        if not live[protocol] then
          count = count + 1
        end
        live[protocol] = true
        if name ~= 'w:' .. (except or '') then
          others = others + 1
          if generation and tonumber(learned) ~= generation then
            behind = behind + 1
          end
        end
      else
        redis.call('HDEL', registry, name)
      end
    end
  end
  local _, known = protocolsOf(redis.call('HGET', registry, 'p'))
  if count > 0 and count < known then
    redis.call('HSET', registry, 'p', listOf(live), 'q', string.format('%.0f', now + fenceQuietMs(registry)))
  end
  return live, count, others, behind
end

-- Whether an index may complete for a writer of `protocol` who knows `generation`: the
-- generation is the registry's, every live writer is of that protocol, and no protocol
-- left within the quiet time.
local function fenceOpen(registry, protocol, generation)
  local live = liveProtocols(registry)
  local g, q = unpack(redis.call('HMGET', registry, 'g', 'q'))
  if tonumber(g or '0') ~= generation or tonumber(q or '0') > nowMs() then
    return false
  end
  for other in pairs(live) do
    if other ~= protocol then
      return false
    end
  end
  return true
end
