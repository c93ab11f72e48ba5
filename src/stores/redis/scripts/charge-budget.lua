--[[
  Charges a cost against a rate budget, or refuses it whole (GCRA, the generic
  cell rate algorithm: one number per budget, the theoretical arrival time).

  A budget of `limit` units per period refills at one unit each `interval` =
  period / limit and holds at most `limit` units, so a quiet caller may spend
  them in one burst. The key holds the time at which the budget would be full
  again; a charge moves it `cost` intervals on, and is refused when that would
  put it more than a full budget ahead of now. Time comes from Redis (TIME), so
  every API process shares one clock.

  Safe to resend: a call resent after a lost reply (ioredis replays commands in
  flight when a connection drops) charges twice. That only ever makes the
  budget stricter, by one request's cost, for a caller whose reply was lost,
  and refills within one interval per unit; a receipt per call would cost a
  write on every request to prevent it.

  Input:
    KEYS[1]      budget: the budget (string: microseconds of its theoretical arrival time)
    ARGV[1]      intervalMicros: microseconds a unit takes to refill (integer >= 1)
    ARGV[2]      limit: units the budget holds when full (integer >= 1)
    ARGV[3]      cost: units to charge (integer, 1 to limit)

  Output (`ahead`: microseconds until the budget is full again, what RateLimit-Reset tells):
    { APPLIED, 0, ahead }               charged; `ahead` after the charge
    { OVER_BUDGET, wait, ahead }        nothing charged; microseconds until the cost would be accepted
    { INVALID_ARGUMENTS }               an argument out of range; nothing written
]]
--@include statuses

local interval = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
if not interval or not limit or not cost or interval < 1 or limit < 1 or cost < 1 or cost > limit then
  return { INVALID_ARGUMENTS }
end

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local arrival = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if arrival < now then arrival = now end

local next_arrival = arrival + cost * interval
local wait = next_arrival - limit * interval - now
if wait > 0 then
  return { OVER_BUDGET, wait, arrival - now }
end
-- '%.0f': a Lua number as an argument is written with 14 significant digits, too few for microseconds.
redis.call('SET', KEYS[1], string.format('%.0f', next_arrival), 'PX', math.ceil((next_arrival - now) / 1000) + 1)
return { APPLIED, 0, next_arrival - now }
