--[[
  Finds a user among a target's likers.

  Expects KEYS[firstShard + g] to be the user's membership shard in generation g.
  Returns the KEYS index of the shard holding the user, or nil.
]]
local firstShard = 4

local function findMember(newestGeneration, user)
  for g = 0, newestGeneration do
    if redis.call('SISMEMBER', KEYS[firstShard + g], user) == 1 then
      return firstShard + g
    end
  end
  return nil
end
