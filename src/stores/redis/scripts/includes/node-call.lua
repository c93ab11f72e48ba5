--[[
  The arguments of a script called once per node over many items
  (src/stores/redis/per-node.ts): at ARGV[at] the number of items n, then each
  item's number of values (at least one), then the values; the keys are KEYS,
  or on a cluster KEYS[1] and then the ARGV after the values.
]]

-- Each item's number of values and their total, or nil when the counts are not valid.
local function itemSizes(at)
  local n = tonumber(ARGV[at])
  if not n or n < 1 or #ARGV < at + n then
    return nil
  end
  local sizes, total = {}, 0
  for i = 1, n do
    sizes[i] = tonumber(ARGV[at + i])
    if not sizes[i] or sizes[i] < 1 then
      return nil
    end
    total = total + sizes[i]
  end
  return sizes, total
end

-- Key i of the call, the keys past KEYS being named in ARGV from `named` on.
local function nodeKey(i, named)
  return KEYS[i] or ARGV[named + i - 1 - #KEYS]
end
