// Readings of the case's Redis for figures: commands run so far (INFO
// commandstats, which counts the commands scripts call too) and memory.
import type { Redis } from "ioredis";

/** Calls so far per command name. */
export async function commandCalls(redis: Redis): Promise<Map<string, number>> {
  const info = await redis.info("commandstats");
  const calls = new Map<string, number>();
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls.set(match[1] as string, Number(match[2]));
  return calls;
}

/** `later` minus `earlier`, per command, and in all. */
export function callsBetween(
  earlier: ReadonlyMap<string, number>,
  later: ReadonlyMap<string, number>,
): { readonly total: number; readonly byCommand: Map<string, number> } {
  const byCommand = new Map<string, number>();
  let total = 0;
  for (const [name, n] of later) {
    const delta = n - (earlier.get(name) ?? 0);
    byCommand.set(name, delta);
    total += delta;
  }
  return { total, byCommand };
}

/** `used_memory` and `maxmemory` (0: no limit), in bytes. */
export async function memory(redis: Redis): Promise<{ readonly used: number; readonly max: number }> {
  const info = await redis.info("memory");
  const field = (name: string) => Number(new RegExp(`^${name}:(\\d+)`, "m").exec(info)?.[1] ?? Number.NaN);
  return { used: field("used_memory"), max: field("maxmemory") };
}

export const mb = (bytes: number) => `${(bytes / 1_048_576).toFixed(1)} MB`;
