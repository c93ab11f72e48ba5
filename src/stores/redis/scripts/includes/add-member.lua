--[[
  Adds a user who is not a member to the newest generation with room for them,
  moving the target to a later generation when the user's shard is full.
  Returns true when added, false when every generation is full (nothing written).
]]
local function addMember(counters, user, capacity, newest)
  local generation = newest
  local generations = #KEYS - firstShard + 1
  while redis.call('SCARD', KEYS[firstShard + generation]) >= capacity do
    generation = generation + 1
    if generation >= generations then
      return false
    end
  end
  if generation ~= newest then
    redis.call('HSET', counters, 'gen', generation)
  end
  redis.call('SADD', KEYS[firstShard + generation], user)
  return true
end
