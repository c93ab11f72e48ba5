--[[
  Releases a lock only if the caller still holds it.

  Input:
    KEYS[1]      the lock
    ARGV[1]      the holder's token

  Output:
    1 released, 0 held by someone else or expired
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
