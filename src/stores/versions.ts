// A relation change's version (likes, collects, follows): epoch * 10^16 + microseconds of the Redis clock that
// stamped it. The epoch of a target is bumped in PostgreSQL at each rebuild into
// Redis, so every change made after a rebuild outranks every change made before
// it, whichever clock stamped the older one. Microseconds stay below 10^16 until
// the year 2286; the decimal scale keeps versions readable in PostgreSQL, where
// they are numeric (a bigint would cap the epochs of a target at 921).
// Lua never sees the composite (its numbers are doubles, exact to 2^53 only):
// scripts keep epoch and microseconds apart, in the hash fields 'ep' and 'ver'.
export const epochScale = 10n ** 16n;

export const versionOf = (epoch: bigint, micros: bigint): bigint => epoch * epochScale + micros;

export const splitVersion = (version: bigint): { epoch: bigint; micros: bigint } => ({
  epoch: version / epochScale,
  micros: version % epochScale,
});
