--[[
  Validates the user id argument before any write (scripts do not roll back).
  Returns true when `user` is a positive decimal integer.
]]
local function isUserId(user)
  return type(user) == 'string' and string.match(user, '^[1-9]%d*$') ~= nil and #user <= 19
end
