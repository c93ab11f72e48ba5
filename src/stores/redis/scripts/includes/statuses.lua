--[[
  Status codes, the first element of every script's reply.
  src/stores/redis/statuses.ts names the same codes; a unit test keeps them equal.
]]
local APPLIED = 1
local UNCHANGED = 0
local TARGET_ABSENT = -1
local TARGET_FULL = -2
local INVALID_ARGUMENTS = -3
local NOT_PERSISTED = -4
local CHANGED_SINCE = -5
local TOO_MANY_GENERATIONS = -6
local TOO_LATE = -7
local OVER_BUDGET = -8
local DEADLINE_PASSED = -9
local LOCK_LOST = -10
local FENCED = -11
