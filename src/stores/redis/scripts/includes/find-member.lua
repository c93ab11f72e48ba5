--[[
  Finds a user among a target's likers.

  Expects KEYS[2 + g] to be the user's membership shard in generation g.
  Returns the KEYS index of the shard holding the user, or nil.
]]
local function findMember(newestGeneration, user)
  for g = 0, newestGeneration do
    if redis.call('SISMEMBER', KEYS[2 + g], user) == 1 then
      return 2 + g
    end
  end
  return nil
end
