--[[
  Validates field/value arguments for a counter hash before any write: at least
  one pair, every value a number. Returns true when they are.
]]
local function areCounterFields(argv)
  local n = #argv
  if n == 0 or n % 2 == 1 then
    return false
  end
  for i = 2, n, 2 do
    if not tonumber(argv[i]) then
      return false
    end
  end
  return true
end
