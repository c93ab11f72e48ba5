--[[
  The bookkeeping fields of a target's counter hash, beside its counters.
  src/stores/redis/keys.ts names the same fields; a unit test keeps them equal.
]]
local generationField = 'gen'
local authorField = 'author'
local versionField = 'ver'
local epochField = 'ep'
local rebuiltAtField = 'rb'
local snapshotMarkField = 'mk'
