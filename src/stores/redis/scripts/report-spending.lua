--[[
  Adds units an API process already let through to a rate budget's shared
  state, unconditionally, and answers how far the budget is spent now, so the
  process can count what the other processes spent (src/domain/local-budgets.ts
  decides these budgets in memory and calls this off the request path).

  The state is charge-budget.lua's: one number, the theoretical arrival time
  (GCRA). A budget of `limit` units per period refills at one unit each
  `interval` = period / limit; the key holds the time at which the budget would
  be full again, and the units move it `units` intervals on. Nothing is refused
  here: the units were spent already. The time is capped at one full budget
  (one period) past now, so a subject that overspent while processes did not
  yet know of each other is refused for at most one period, never longer.
  Time comes from Redis (TIME); the answer is relative to it, so the callers'
  clocks need not agree with Redis's or each other's.

  Safe to resend: a call resent after a lost reply (ioredis replays commands in
  flight when a connection drops) adds its units twice. That only makes the
  budget stricter, by one report's units, within the cap above, and refills
  within one interval per unit; a receipt per call would cost a write per report
  to prevent it.

  Input:
    KEYS[1]      budget: the budget (string: microseconds of its theoretical arrival time)
    ARGV[1]      intervalMicros: microseconds a unit takes to refill (integer >= 1)
    ARGV[2]      limit: units the budget holds when full (integer >= 1)
    ARGV[3]      units: spent since the process last reported (integer >= 1; more than limit is capped)

  Output:
    { APPLIED, ahead }                  added; microseconds the theoretical arrival time is ahead of
                                        Redis's now (0 to limit * interval): how far the budget is spent
    { INVALID_ARGUMENTS }               an argument out of range; nothing written
]]
--@include statuses

local interval = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local units = tonumber(ARGV[3])
if not interval or not limit or not units or interval < 1 or limit < 1 or units < 1 then
  return { INVALID_ARGUMENTS }
end

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local arrival = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if arrival < now then arrival = now end

arrival = arrival + units * interval
local ceiling = now + limit * interval
if arrival > ceiling then arrival = ceiling end
-- '%.0f': a Lua number as an argument is written with 14 significant digits, too few for microseconds.
redis.call('SET', KEYS[1], string.format('%.0f', arrival), 'PX', math.ceil((arrival - now) / 1000) + 1)
return { APPLIED, arrival - now }
