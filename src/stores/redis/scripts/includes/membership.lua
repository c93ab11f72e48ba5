--[[
  A target's members of one relation, sharded by generation (see keys.ts):
  KEYS[firstShard + g] is the user's membership shard in generation g, and the
  counter hash field the caller names holds the relation's newest generation.
]]

local firstShard = 5

-- The KEYS index of the shard holding the user, or nil.
local function findMember(newestGeneration, user)
  for g = 0, newestGeneration do
    if redis.call('SISMEMBER', KEYS[firstShard + g], user) == 1 then
      return firstShard + g
    end
  end
  return nil
end

-- Adds a user who is not a member to the newest generation with room for them,
-- moving the relation to a later generation when the user's shard there is full.
-- Returns true when added, false when every generation is full (nothing written).
local function addMember(counters, user, capacity, newest, generationField)
  local generation = newest
  local generations = #KEYS - firstShard + 1
  while redis.call('SCARD', KEYS[firstShard + generation]) >= capacity do
    generation = generation + 1
    if generation >= generations then
      return false
    end
  end
  if generation ~= newest then
    redis.call('HSET', counters, generationField, generation)
  end
  redis.call('SADD', KEYS[firstShard + generation], user)
  return true
end
