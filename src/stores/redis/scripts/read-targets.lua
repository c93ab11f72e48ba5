#!lua flags=no-writes
--[[
  Reads what a feed shows of many targets in one step: the counters asked for,
  and whether one user is among each target's likers. Only on a standalone
  Redis (its keys span slots); a cluster reads the same with pipelines per node.

  A reply of one string rather than nested arrays: the client decodes one item
  instead of about seven per target, which was a quarter of the API's CPU.

  Input:
    KEYS[1..n]        counter hash of each target
    KEYS[n+1..]       the user's membership shards, target after target: for
                      target i, its generations 0..p_i-1 (see keys.ts)
    ARGV[1]           n, the number of targets
    ARGV[2]           user id, or '' to read counters only
    ARGV[3]           f, the number of counter fields
    ARGV[4..3+f]      the counter fields
    ARGV[4+f..3+f+n]  p_i: how many of the user's shards were passed for target i

  Output:
    { UNCHANGED, text }  one line per target, separated by ';':
                           ''                         Redis does not hold the target
                           'c1,...,cf,gen,liked'      counters ('' when absent), the newest
                                                      generation, and the user's like: 1 or 0,
                                                      '?' when the target has grown past the
                                                      shards passed and none of them holds the user,
                                                      '' without a user
    { INVALID_ARGUMENTS }

  Reads only, so it runs on replicas and when Redis is out of memory.
]]
--@include statuses
--@include check-user
--@include hash-fields

local n = tonumber(ARGV[1])
local user = ARGV[2]
local f = tonumber(ARGV[3])
if not n or n < 0 or not f or f < 1 or #ARGV ~= 3 + f + n or (user ~= '' and not isUserId(user)) then
  return { INVALID_ARGUMENTS }
end
local fields = {}
for j = 1, f do
  fields[j] = ARGV[3 + j]
end
fields[f + 1] = generationField

local passed = {}
local keysNeeded = n
for i = 1, n do
  passed[i] = tonumber(ARGV[3 + f + i])
  if not passed[i] or passed[i] < 0 or (user == '' and passed[i] > 0) then
    return { INVALID_ARGUMENTS }
  end
  keysNeeded = keysNeeded + passed[i]
end
if #KEYS ~= keysNeeded then
  return { INVALID_ARGUMENTS }
end

local lines = {}
local shard = n + 1
for i = 1, n do
  local values = redis.call('HMGET', KEYS[i], unpack(fields))
  local held = true
  for j = 1, f + 1 do
    if not values[j] then
      values[j] = ''
      -- A hash holds at least its type's first counter, so a missing field is rare: check then.
      if held and j == 1 and redis.call('EXISTS', KEYS[i]) == 0 then
        held = false
      end
    end
  end
  if not held then
    lines[i] = ''
  else
    local liked = ''
    if user ~= '' then
      local newest = tonumber(values[f + 1]) or 0
      liked = '0'
      for g = 0, math.min(newest, passed[i] - 1) do
        if redis.call('SISMEMBER', KEYS[shard + g], user) == 1 then
          liked = '1'
          break
        end
      end
      if liked == '0' and newest >= passed[i] then
        liked = '?'
      end
    end
    values[f + 2] = liked
    lines[i] = table.concat(values, ',')
  end
  shard = shard + passed[i]
end
return { UNCHANGED, table.concat(lines, ';') }
