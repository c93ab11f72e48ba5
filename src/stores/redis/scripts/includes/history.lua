--[[
  The replication history a node's data follows, so that data a failover or a
  restart may have taken back is never answered from (src/stores/redis/history.ts).

  A Redis primary names its history with its replication id (INFO replication's
  master_replid), which its replicas share. A replica promoted on a failover
  starts a history of its own, and so does a primary restarted from its AOF:
  either may lack changes the old history acknowledged (replication and AOF
  fsync are asynchronous). A target loaded from PostgreSQL is stamped with the
  history it was loaded under (hash field 'rh'); on a node whose history is
  another, the target is suspect: answered as not held, so reads go to
  PostgreSQL and writes load it again, once PostgreSQL holds its last change.
  Read once per script run, like the clock.
]]
--@include hash-fields

local historyRead = nil

-- The history as a negative integer below -2, from the replication id's first 52 bits: a
-- member index holding it stays an intset (its other marks are integers too), which a
-- string member would turn into a table of strings several times its size.
local function nodeHistory()
  if not historyRead then
    local id = string.match(redis.call('INFO', 'replication'), 'master_replid:(%x+)') or '0'
    historyRead = string.format('-%.0f', tonumber(string.sub(id, 1, 13), 16) + 3)
  end
  return historyRead
end

-- Whether a counter hash stamped `stamped` ('rh', false when absent) was loaded in this node's history.
local function trustedHistory(stamped)
  return stamped == nodeHistory()
end
