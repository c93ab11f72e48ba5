#!lua flags=no-writes,allow-cross-slot-keys
--[[
  Reads what a feed shows of many targets in one step: the counters asked for,
  and whether one user is among each target's members of each relation asked
  for (likers, collectors, followers). A target whose counters the caller holds
  already (an API process's hot counts, src/stores/redis/hot-counts.ts) is asked
  for the user's memberships alone, in the generations the caller knows it to
  have. On a cluster, one call per node: it declares only its first key, which
  routes it to that key's node, and names the others, of other slots on the same
  node, after the arguments (a node refuses a call whose declared keys span slots,
  but lets a script with allow-cross-slot-keys read any key of its own slots).

  A reply of one string rather than nested arrays: the client decodes one item
  instead of about seven per target, which was a quarter of the API's CPU.

  Input:
    KEYS[1..c]        counters: counter hash of each target whose counters are asked for (c_i 1), in order
    keys c+1..        the user's membership shards, target after target and, for each
                      target, relation after relation: for target i and relation j, its
                      generations 0..p_ij-1 (see keys.ts)
                      The keys are KEYS, or on a cluster KEYS[1] and then the ARGV after
                      the fixed ones.
    ARGV[1]           targetCount: n, the number of targets
    ARGV[2]           userId: user id, or '' to read counters only
    ARGV[3]           fieldCount: f, the number of counter fields
    ARGV[4..3+f]      fields: the counter fields
    then              r, the number of relations (ARGV[4+f])
    then              the counter hash field holding each relation's newest generation
                      (ARGV[5+f..4+f+r])
    then              c: n characters, c_i: 1 to read target i's counters, 0 when the caller
                      holds them (then its counter hash is not read: the p_ij are its generations + 1)
    then              p: n*r digits, p_ij: how many of the user's shards were passed for target i,
                      relation j
    then              x: r characters, x_j: 1 when the user's member index of relation j is passed
                      (includes/member-index.lua)
    then              the writers' fence generation the indexes completed under (index-fence.ts)
    then n ids        the targets' ids, when some x_j is 1
    keys after the shards: the member index of each relation whose x_j is 1

  Output:
    { UNCHANGED, text, indexes }
                         indexes: a letter per relation, what its member index told: 'c' complete,
                         so a target it lacks was answered 0 without its shards; 'm' missing, not
                         loaded, or loaded in another replication history or fence generation;
                         'o' overflowed; '-' none passed
                         text: one line per target, separated by ';':
                           ''                          Redis does not hold the target (c_i 1), or holds it
                                                       from another replication history (includes/history.lua)
                           'c1,...,cf,g1,...,gr,m'     counters ('' when absent), each relation's
                                                       newest generation, then a mark per relation:
                                                       1 or 0 whether the user is a member, '?' when
                                                       the relation has grown past the shards passed
                                                       and none of them holds the user; no marks
                                                       without a user
                           '=m'                        c_i 0: the marks alone, 1 or 0
    { INVALID_ARGUMENTS }

  Reads only, so it runs on replicas and when Redis is out of memory.
]]
--@include statuses
--@include check-user
--@include member-index
--@include history

local n = tonumber(ARGV[1])
local user = ARGV[2]
local f = tonumber(ARGV[3])
local r = f and tonumber(ARGV[4 + f])
local flags = f and r and 5 + f + r
local fixed = flags and flags + 3
local generation = fixed and tonumber(ARGV[fixed])
if not n or n < 0 or not f or f < 1 or not r or r < 0 or #ARGV < fixed or (user ~= '' and not isUserId(user)) or not generation or generation < 0 then
  return { INVALID_ARGUMENTS }
end
local counterFlags, shardCounts, indexFlags = ARGV[flags], ARGV[flags + 1], ARGV[flags + 2]
if #counterFlags ~= n or #shardCounts ~= n * r or #indexFlags ~= r then
  return { INVALID_ARGUMENTS }
end
-- One string per list of small numbers rather than an argument each: Redis parses, and
-- Lua interns, each argument, which was about a third of Redis's work per feed.
local zero, one = string.byte('0'), string.byte('1')
local indexed = {}
local indexes = 0
for j = 1, r do
  local flag = string.byte(indexFlags, j)
  if flag ~= zero and flag ~= one or (flag == one and user == '') then
    return { INVALID_ARGUMENTS }
  end
  indexed[j] = flag == one
  if indexed[j] then
    indexes = indexes + 1
  end
end
local ids = fixed
if indexes > 0 then
  fixed = fixed + n
  if #ARGV < fixed then
    return { INVALID_ARGUMENTS }
  end
end
local fields = {}
for j = 1, f do
  fields[j] = ARGV[3 + j]
end
for j = 1, r do
  fields[f + j] = ARGV[4 + f + j]
end
fields[f + r + 1] = historyField

-- reads[i]: the KEYS index of target i's counter hash, or nil when its counters are not asked for.
local reads = {}
local countersAsked = 0
for i = 1, n do
  local flag = string.byte(counterFlags, i)
  if flag ~= zero and flag ~= one then
    return { INVALID_ARGUMENTS }
  end
  if flag == one then
    countersAsked = countersAsked + 1
    reads[i] = countersAsked
  end
end
local passed = {}
local keysNeeded = countersAsked + indexes
for i = 1, n * r do
  passed[i] = string.byte(shardCounts, i) - zero
  if passed[i] < 0 or passed[i] > 9 or (user == '' and passed[i] > 0) then
    return { INVALID_ARGUMENTS }
  end
  keysNeeded = keysNeeded + passed[i]
end
local keys = KEYS
if #KEYS + #ARGV - fixed ~= keysNeeded or (#ARGV > fixed and #KEYS ~= 1) then
  return { INVALID_ARGUMENTS }
elseif #ARGV > fixed then
  keys = { unpack(KEYS) }
  for i = fixed + 1, #ARGV do
    keys[#keys + 1] = ARGV[i]
  end
end

-- Whether one of the user's shards from..from+count-1 holds the user.
local function holds(from, count)
  for g = 0, count - 1 do
    if redis.call('SISMEMBER', keys[from + g], user) == 1 then
      return true
    end
  end
  return false
end

-- Per relation, the targets its complete member index lacks (the user joined none of them),
-- or nil where no complete index was passed; and a letter per relation for the reply.
local lacking = {}
local indexStates = {}
local indexKey = #keys - indexes
for j = 1, r do
  indexStates[j] = '-'
  if indexed[j] then
    indexKey = indexKey + 1
    -- The marks and the targets asked together, in steps under Lua's bound on unpacked values.
    local found = redis.call('SMISMEMBER', keys[indexKey], indexComplete, indexOverflowed, indexHistoryMark(generation), unpack(ARGV, ids + 1, ids + math.min(n, 1000)))
    if found[2] == 1 then
      indexStates[j] = 'o'
    elseif found[1] == 0 or found[3] == 0 then
      indexStates[j] = 'm'
    else
      indexStates[j] = 'c'
      local lacks = {}
      for i = 1, #found - 3 do
        lacks[i] = found[i + 3] == 0
      end
      for from = 1001, n, 1000 do
        local more = redis.call('SMISMEMBER', keys[indexKey], unpack(ARGV, ids + from, ids + math.min(n, from + 999)))
        for k = 1, #more do
          lacks[from + k - 1] = more[k] == 0
        end
      end
      lacking[j] = lacks
    end
  end
end

-- Whether target i's shards of relation j (from..from+count-1) hold the user, asking
-- them only when the index does not rule the user out.
local function joined(i, j, from, count)
  local lacks = lacking[j]
  if lacks and lacks[i] then
    return false
  end
  return holds(from, count)
end

local lines = {}
local shard = countersAsked + 1
for i = 1, n do
  if not reads[i] then
    local marks = { '=' }
    for j = 1, r do
      local p = passed[(i - 1) * r + j]
      marks[j + 1] = joined(i, j, shard, p) and '1' or '0'
      shard = shard + p
    end
    lines[i] = table.concat(marks)
  else
    local values = redis.call('HMGET', keys[reads[i]], unpack(fields))
    -- Absent, or loaded in another replication history: answered as not held.
    local held = trustedHistory(values[f + r + 1])
    values[f + r + 1] = nil
    for j = 1, f + r do
      values[j] = values[j] or ''
    end
    if not held then
      lines[i] = ''
      for j = 1, r do
        shard = shard + passed[(i - 1) * r + j]
      end
    else
      local marks = {}
      for j = 1, r do
        local p = passed[(i - 1) * r + j]
        if user ~= '' then
          local newest = tonumber(values[f + j]) or 0
          local ruledOut = lacking[j] and lacking[j][i]
          local mark = joined(i, j, shard, math.min(newest + 1, p)) and '1' or '0'
          if mark == '0' and newest >= p and not ruledOut then
            mark = '?'
          end
          marks[j] = mark
        end
        shard = shard + p
      end
      values[f + r + 1] = table.concat(marks)
      lines[i] = table.concat(values, ',')
    end
  end
end
return { UNCHANGED, table.concat(lines, ';'), table.concat(indexStates) }
