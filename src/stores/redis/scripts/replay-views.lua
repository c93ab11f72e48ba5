--[[
  Brings into a rebuilt post views of an earlier epoch that PostgreSQL applied
  after the rebuild's snapshot: the rebuild could not see them. The post
  remembers, per earlier epoch, the views of it that it holds (KEYS[2]: the
  snapshot's totals, then every replay's); a replay adds only what the
  epoch's total PostgreSQL now holds adds to that, so replays are safe to
  repeat and to reorder. Appends no outbox event: PostgreSQL already has them.

  Input:
    KEYS[1]       counters: counter hash of the post
    KEYS[2]       replayed: per earlier epoch, the views of it the post holds
    ARGV[1]       epoch: the epoch of the views
    ARGV[2]       total: that epoch's views PostgreSQL now holds
    ARGV[3]       rebuildEpoch: the epoch of the rebuild that missed them: another means the post was
                  rebuilt again since, and that rebuild's snapshot holds them

  Output:
    { APPLIED }              replayed
    { UNCHANGED }            nothing to add
    { TOO_LATE }             the rebuild window closed: the post no longer knows what it holds
                             of that epoch, and the caller rebuilds it
    { INVALID_ARGUMENTS }
]]
--@include statuses
--@include hash-fields
--@include rebuild-window

local epoch = tonumber(ARGV[1])
local total = tonumber(ARGV[2])
local intoEpoch = tonumber(ARGV[3])
if not epoch or not total or total < 0 or not intoEpoch then
  return { INVALID_ARGUMENTS }
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return { UNCHANGED }
end
local currentEpoch = tonumber(redis.call('HGET', KEYS[1], epochField) or '0')
if epoch >= currentEpoch or currentEpoch ~= intoEpoch then
  return { UNCHANGED }
end
if not inRebuildWindow(KEYS[1]) then
  return { TOO_LATE }
end
local held = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
if total <= held then
  return { UNCHANGED }
end
redis.call('HINCRBY', KEYS[1], 'read', total - held)
redis.call('HSET', KEYS[2], ARGV[1], string.format('%.0f', total))
-- Outlasts the window, as the rebuild's own expiry does.
redis.call('PEXPIRE', KEYS[2], math.floor(rebuildWindowMicros / 1000) + 60000)
return { APPLIED }
