--[[
  Releases a lock only if the caller still holds it.

  Input:
    KEYS[1]      lock: the lock
    ARGV[1]      token: the holder's token

  Output:
    { APPLIED }              released
    { UNCHANGED }            held by someone else, or expired
]]
--@include statuses

if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return { APPLIED }
end
return { UNCHANGED }
