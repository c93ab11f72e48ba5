import { describe, expect, it } from "vitest";
import type { Target } from "../../../src/domain/model/index.js";
import { SettledLoader } from "../../../src/graphql/loaders.js";

const post = (id: bigint): Target => ({ type: "post", id });
const comment = (id: bigint): Target => ({ type: "comment", id });

/** A loader whose batches answer "post:1"-like values in key order, recording what each batch was asked. */
function recordingLoader(answer: (target: Target) => string | undefined = (t) => `${t.type}:${t.id}`) {
  const batches: { targets: string[]; hints: readonly string[] | undefined }[] = [];
  let failWith: Error | null = null;
  const loader = new SettledLoader<string | undefined, Target, string>(async (targets, hints) => {
    batches.push({ targets: targets.map((t) => `${t.type}:${t.id}`), hints });
    if (failWith) throw failWith;
    return targets.map(answer);
  });
  return { loader, batches, failNextWith: (error: Error | null) => (failWith = error) };
}

describe("SettledLoader", () => {
  it("when targets of one type are loaded in one tick, then one batch loads them and each caller gets its own target's value", async () => {
    const { loader, batches } = recordingLoader();
    const values = await Promise.all([loader.load(post(3n)), loader.load(post(1n)), loader.load(post(2n))]);
    expect(values).toEqual(["post:3", "post:1", "post:2"]);
    expect(batches).toEqual([{ targets: ["post:3", "post:1", "post:2"], hints: undefined }]);
  });

  it("when targets of two types are loaded in one tick, then each type has its own batch", async () => {
    const { loader, batches } = recordingLoader();
    const values = await Promise.all([loader.load(post(1n)), loader.load(comment(1n)), loader.load(post(2n))]);
    expect(values).toEqual(["post:1", "comment:1", "post:2"]);
    expect(batches.map((b) => b.targets).sort()).toEqual([["comment:1"], ["post:1", "post:2"]]);
  });

  it("when a target was loaded, then get answers its value synchronously, an undefined value too, with no second batch", async () => {
    const { loader, batches } = recordingLoader((t) => (t.id === 2n ? undefined : `${t.type}:${t.id}`));
    await Promise.all([loader.load(post(1n)), loader.load(post(2n))]);
    expect(loader.get(post(1n))).toBe("post:1");
    expect(loader.get(post(2n))).toBeUndefined();
    expect(batches).toHaveLength(1);
  });

  it("when get asks for a target not loaded yet, then it answers a promise, and targets asked in one tick share a batch", async () => {
    const { loader, batches } = recordingLoader();
    const first = loader.get(post(1n));
    const second = loader.get(post(2n));
    expect(first).toBeInstanceOf(Promise);
    expect(await Promise.all([first, second])).toEqual(["post:1", "post:2"]);
    expect(batches).toHaveLength(1);
  });

  it("when lists are prefetched in one tick, then one batch loads every target they name once, with every hint any gave", async () => {
    const { loader, batches } = recordingLoader();
    await Promise.all([loader.prefetch([post(1n), post(2n)], ["like"]), loader.prefetch([post(2n), post(3n)], ["collect", "like"])]);
    expect(batches).toHaveLength(1);
    expect(batches[0]?.targets).toEqual(["post:1", "post:2", "post:3"]);
    expect([...(batches[0]?.hints ?? [])].sort()).toEqual(["collect", "like"]);
    expect([post(1n), post(2n), post(3n)].map((t) => loader.get(t))).toEqual(["post:1", "post:2", "post:3"]);
  });

  it("when a prefetch names targets already loaded, then only the others are loaded, and none when all were", async () => {
    const { loader, batches } = recordingLoader();
    await loader.load(post(1n));
    await loader.prefetch([post(1n), post(2n)], ["like"]);
    await loader.prefetch([post(1n), post(2n)], ["like"]);
    expect(batches.map((b) => b.targets)).toEqual([["post:1"], ["post:2"]]);
  });

  it("when a prefetch names targets of two types, then it is refused before any batch", async () => {
    const { loader, batches } = recordingLoader();
    await expect(loader.prefetch([post(1n), comment(2n)])).rejects.toThrow("prefetch takes targets of one type at a time.");
    expect(batches).toEqual([]);
  });

  it("when a batch of loads fails, then every caller of it gets the error, and a later load asks again", async () => {
    const { loader, batches, failNextWith } = recordingLoader();
    const away = new Error("Redis away");
    failNextWith(away);
    const outcomes = await Promise.allSettled([loader.load(post(1n)), loader.load(post(2n))]);
    expect(outcomes).toEqual([
      { status: "rejected", reason: away },
      { status: "rejected", reason: away },
    ]);
    failNextWith(null);
    expect(await loader.load(post(1n))).toBe("post:1");
    expect(batches).toHaveLength(2);
  });

  it("when a batch of prefetches fails, then every list prefetched in that tick gets the error and nothing is settled", async () => {
    const { loader, failNextWith } = recordingLoader();
    const away = new Error("Redis away");
    failNextWith(away);
    const outcomes = await Promise.allSettled([loader.prefetch([post(1n)]), loader.prefetch([post(2n)])]);
    expect(outcomes).toEqual([
      { status: "rejected", reason: away },
      { status: "rejected", reason: away },
    ]);
    failNextWith(null);
    const again = loader.get(post(1n));
    expect(again).toBeInstanceOf(Promise);
    expect(await again).toBe("post:1");
  });

  it("when a value is set, then get and load answer it without a batch, in place of what was loaded", async () => {
    const { loader, batches } = recordingLoader();
    await loader.load(post(1n));
    loader.set(post(1n), "after the like");
    loader.set(post(2n), "never loaded");
    expect(loader.get(post(1n))).toBe("after the like");
    expect(await loader.load(post(1n))).toBe("after the like");
    expect(await loader.load(post(2n))).toBe("never loaded");
    expect(batches).toHaveLength(1);
  });
});
