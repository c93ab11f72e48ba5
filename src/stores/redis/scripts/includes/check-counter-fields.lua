--[[
  Validates field/value arguments for a counter hash before any write: at least
  one pair, every value a number (but a rebuild's snapshot mark, 'xmin:xmax:xip,…').
  Returns true when they are.
]]
--@include hash-fields
local function areCounterFields(argv)
  local n = #argv
  if n == 0 or n % 2 == 1 then
    return false
  end
  for i = 2, n, 2 do
    local mark = argv[i - 1] == snapshotMarkField and string.match(argv[i], '^%d+:%d+:[%d,]*$')
    if not tonumber(argv[i]) and not mark then
      return false
    end
  end
  return true
end
