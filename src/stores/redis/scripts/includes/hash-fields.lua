--[[
  The bookkeeping fields of a target's counter hash, beside its counters.
  src/stores/redis/keys.ts names the same fields; a unit test keeps them equal.
  Each relation's newest membership generation has a field of its own, which
  the caller passes (src/stores/redis/relations.ts).
]]
local authorField = 'author'
local versionField = 'ver'
local epochField = 'ep'
local rebuiltAtField = 'rb'
local snapshotMarkField = 'mk'
local epochViewsField = 'vt'
local historyField = 'rh'
local seqFieldPrefix = 's:'
