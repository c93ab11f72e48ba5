--[[
  A write's receipt: the status a call first answered, kept for a short while
  under a key the caller names per call (an operation id). ioredis re-sends a
  command whose reply a broken connection lost, so one call can run twice; the
  second run finds the receipt, writes nothing, and answers as the first did.
  ioredis re-sends once a new connection is ready, however long that takes;
  a minute covers a restart that loads its AOF, at a cost of one small key
  per write for that minute (about 90 bytes: 27 MB at 5,000 writes a second).
]]
local receiptLifetimeMs = 60000

-- The status this call already answered, or nil on its first run.
local function firstAnswer(receipt)
  local status = redis.call('GET', receipt)
  if status then
    return tonumber(status)
  end
  return nil
end

local function keepReceipt(receipt, status)
  redis.call('SET', receipt, status, 'PX', receiptLifetimeMs)
end
