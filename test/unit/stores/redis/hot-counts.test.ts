// The hot counts' rules, with a stand-in for Redis's invalidations: what is kept,
// what a write heard drops, and when entries may be served. No Redis behaviour here.
import { describe, expect, it } from "vitest";
import type { CountInvalidations } from "../../../../src/stores/redis/count-invalidations.js";
import type { Target } from "../../../../src/domain/model/index.js";
import { HotCounts } from "../../../../src/stores/redis/hot-counts.js";
import { createRedisKeys } from "../../../../src/stores/redis/keys.js";

function stand(): { invalidations: CountInvalidations; tell(key: string | null): void; confirm(atMs: number): void; listen(on: boolean): void } {
  let handler: (key: string | null) => void = () => {};
  let confirmedAt = Number.NEGATIVE_INFINITY;
  let listening = true;
  return {
    invalidations: {
      onInvalidate: (next) => (handler = next),
      confirmedAt: () => confirmedAt,
      listening: () => listening,
      barrier: () => Promise.resolve(),
      close: () => Promise.resolve(),
    },
    tell: (key) => handler(key),
    confirm: (atMs) => (confirmedAt = atMs),
    listen: (on) => (listening = on),
  };
}

const entry = (likes: number) => ({ counts: { like: likes }, generations: { like: 0 } });
const keys = createRedisKeys(1024);
const post = (id: number): Target => ({ type: "post", id: BigInt(id) });
const options = (invalidations: CountInvalidations) => ({ invalidations, targetOf: (key: string) => keys.parseCounters(key), maxStalenessMs: 100 });

describe("hot counts", () => {
  it("when a read's reply arrives with no write heard meanwhile, then it is kept, and a write heard later drops it", () => {
    const redis = stand();
    const hot = new HotCounts({ ...options(redis.invalidations), maxTargets: 10 });
    const fill = hot.fill([post(1)]);
    fill.keep(post(1), entry(3));
    fill.end();
    expect(hot.get(post(1))).toEqual(entry(3));
    redis.tell(keys.counters(post(1)));
    expect(hot.get(post(1))).toBeUndefined();
    expect(hot.stats()).toMatchObject({ hits: 1, misses: 1, invalidations: 1, entries: 0 });
  });

  it("when a write is heard while a read of the key is in flight, then the read's reply is not kept", () => {
    const redis = stand();
    const hot = new HotCounts({ ...options(redis.invalidations), maxTargets: 10 });
    const fill = hot.fill([post(1), post(2)]);
    redis.tell(keys.counters(post(1)));
    fill.keep(post(1), entry(3));
    fill.keep(post(2), entry(4));
    fill.end();
    expect(hot.peek(post(1))).toBeUndefined();
    expect(hot.peek(post(2))).toEqual(entry(4));
  });

  it("when everything is invalidated (a flush, a listener lost) or nothing listens as a read is sent, then nothing read meanwhile is kept", () => {
    const redis = stand();
    const hot = new HotCounts({ ...options(redis.invalidations), maxTargets: 10 });
    const before = hot.fill([post(2)]);
    before.keep(post(2), entry(1));
    before.end();
    const during = hot.fill([post(1)]);
    redis.tell(null);
    during.keep(post(1), entry(3));
    during.end();
    expect(hot.stats().entries).toBe(0);
    redis.listen(false);
    const deaf = hot.fill([post(1)]);
    deaf.keep(post(1), entry(3));
    deaf.end();
    expect(hot.peek(post(1))).toBeUndefined();
  });

  it("when this process changes a target, then its entry goes at once", () => {
    const redis = stand();
    const hot = new HotCounts({ ...options(redis.invalidations), maxTargets: 10 });
    const fill = hot.fill([post(1)]);
    fill.keep(post(1), entry(3));
    fill.end();
    hot.changed(post(1));
    expect(hot.peek(post(1))).toBeUndefined();
  });

  it("when the newest confirmation is older than the bound, then entries are not served, and when it is younger they are", () => {
    const redis = stand();
    let now = 1_000;
    const hot = new HotCounts({ ...options(redis.invalidations), maxTargets: 10, nowMs: () => now });
    const ages: number[] = [];
    hot.onServed((age) => ages.push(age));
    expect(hot.servable()).toBe(false);
    redis.confirm(950);
    expect(hot.servable()).toBe(true);
    now = 1_051;
    expect(hot.servable()).toBe(false);
    expect(ages).toEqual([50]);
  });

  it("when more targets are read than the bound, then the oldest filled go and no more are held", () => {
    const redis = stand();
    const hot = new HotCounts({ ...options(redis.invalidations), maxTargets: 5 });
    for (let i = 1; i <= 20; i++) {
      const fill = hot.fill([post(i)]);
      fill.keep(post(i), entry(i));
      fill.end();
    }
    expect(hot.stats().entries).toBe(5);
    expect(hot.peek(post(20))).toEqual(entry(20));
    expect(hot.peek(post(15))).toBeUndefined();
  });
});
