--[[
  Reads a user's list (includes/list-positions.lua) for a page, and keeps it a day
  longer, as a write does: only a list loaded in this node's replication history
  is answered from; one of another history (a failover or a restart may have
  taken writes back) is left to its load from PostgreSQL, which replaces it.

  Input:
    KEYS[1]   entries: the list's entries (sorted set)
    KEYS[2]   horizon: the list's horizon
    KEYS[3]   recent: the list's records of recent changes (hash)

  Output:
    { APPLIED, entries, horizon, records }  entries: post, ms, post, ms, …; horizon: '' or
                                            'ms:id'; records: field, value, …
    { UNCHANGED }                           Redis does not hold the list, is loading it, or
                                            holds it from another replication history
]]
--@include statuses
--@include list-positions

local horizon = redis.call('GET', KEYS[2])
if not horizon or horizon == 'loading' or not trustedHorizon(horizon) then
  return { UNCHANGED }
end
keepList(KEYS[1], KEYS[2])
return {
  APPLIED,
  redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES'),
  string.match(horizon, '^(.*)@'),
  redis.call('HGETALL', KEYS[3]),
}
