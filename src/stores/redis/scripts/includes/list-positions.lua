--[[
  Positions in a user's list: a time in milliseconds and a target id, newest
  first; ids are compared as decimal strings (they may pass 2^53). A list's
  horizon (its 'uh' key) is '' when Redis holds every entry, 'loading' while
  scripts/load-list.lua has yet to run, or the position 'ms:id' at and before
  which entries are read from PostgreSQL; but 'loading', followed by '@' and the
  replication history the list was loaded in (includes/history.lua): a list of
  another history (a failover or a restart may have taken writes back) is not
  answered from, but dropped and loaded again from PostgreSQL.
]]
--@include history

local function idBelow(a, b)
  if #a ~= #b then
    return #a < #b
  end
  return a < b
end

-- Whether (atA, idA) comes before (atB, idB), i.e. is older.
local function olderPosition(atA, idA, atB, idB)
  if atA ~= atB then
    return atA < atB
  end
  return idBelow(idA, idB)
end

-- The horizon's time and id, stamped or not, or nil when there is none.
local function horizonOf(value)
  local at, id = string.match(value or '', '^(%d+):(%d+)$')
  if not at then
    at, id = string.match(value or '', '^(%d+):(%d+)@')
  end
  if not at then
    return nil
  end
  return tonumber(at), id
end

-- A horizon's position ('' or 'ms:id') stamped with this node's history.
local function stampedHorizon(position)
  return position .. '@' .. nodeHistory()
end

-- Whether a held list's horizon (not false) may be answered from: loading, or loaded in this node's history.
local function trustedHorizon(value)
  return value == 'loading' or string.match(value, '@(%-%d+)$') == nodeHistory()
end

local listIdleMs = 86400000

-- Keeps a held list a day longer: the horizon a minute less than the entries, so that
-- when the list expires the horizon goes first and the list is never held without them.
local function keepList(entries, horizonKey)
  redis.call('PEXPIRE', horizonKey, listIdleMs)
  redis.call('PEXPIRE', entries, listIdleMs + 60000)
end

-- Pops the oldest entries past `capacity`, moving the horizon to the newest one popped.
local function trimList(entries, horizonKey, capacity)
  local hAt, hId = horizonOf(redis.call('GET', horizonKey))
  local moved = false
  while redis.call('ZCARD', entries) > capacity do
    local popped = redis.call('ZPOPMIN', entries)
    local at, id = tonumber(popped[2]), popped[1]
    if not hAt or olderPosition(hAt, hId, at, id) then
      hAt, hId = at, id
      moved = true
    end
  end
  if moved then
    redis.call('SET', horizonKey, stampedHorizon(string.format('%.0f:%s', hAt, hId)))
  end
end
