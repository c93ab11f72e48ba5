import { describe, expect, it } from "vitest";
import { KnownUsers } from "../../../src/domain/known-users.js";
import type { IdRun } from "../../../src/domain/model/index.js";
import type { UserAnnouncements, UserStore } from "../../../src/domain/ports/index.js";
import { startUserDirectory } from "../../../src/domain/user-directory.js";

/** A user table of these ids, paged as the PostgreSQL store pages it; every call is recorded. */
function tableOf(ids: readonly bigint[]): Pick<UserStore, "idRunsAfter"> & { calls: { after: bigint; maxIds: number }[] } {
  const sorted = [...ids].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const calls: { after: bigint; maxIds: number }[] = [];
  return {
    calls,
    async idRunsAfter(after, maxIds) {
      calls.push({ after, maxIds });
      const runs: IdRun[] = [];
      for (const id of sorted.filter((id) => id > after).slice(0, maxIds)) {
        const last = runs.at(-1);
        if (last && last.last + 1n === id) runs[runs.length - 1] = { first: last.first, last: id };
        else runs.push({ first: id, last: id });
      }
      return runs;
    },
  };
}

const range = (first: bigint, count: number) => Array.from({ length: count }, (_, i) => first + BigInt(i));

/** Announcements whose handler the test calls, as Redis would. */
function fakeAnnouncements(): Pick<UserAnnouncements, "onAnnounced"> & { hear(userId: bigint): void; stopped: boolean } {
  let handler: (userId: bigint) => void = () => {};
  const fake = {
    stopped: false,
    hear: (userId: bigint) => handler(userId),
    async onAnnounced(next: (userId: bigint) => void) {
      handler = next;
      return async () => {
        fake.stopped = true;
      };
    },
  };
  return fake;
}

describe("the user directory", () => {
  it("when the users span several pages, then each statement reads at most a page after the last id seen, and loading ends with every id known", async () => {
    const ids = [...range(1n, 250), ...range(400n, 120), 1_000n];
    const table = tableOf(ids);
    const known = new KnownUsers();
    const logged: unknown[] = [];
    const directory = startUserDirectory({ known, users: table, announcements: null, pageIds: 100, onLoaded: (load) => logged.push(load) });
    const load = await directory.loaded;
    expect(table.calls.map((c) => c.after)).toEqual([0n, 100n, 200n, 449n]);
    expect(table.calls.every((c) => c.maxIds === 100)).toBe(true);
    expect(load).toMatchObject({ ids: ids.length, runs: 3 });
    expect(logged).toEqual([load]);
    expect(known.loaded).toBe(true);
    expect([0n, 1n, 250n, 251n, 400n, 519n, 520n, 1_000n].map((id) => directory.knows(id))).toEqual([false, true, true, false, true, true, false, true]);
    await directory.close();
  });

  it("when a page fails, then it is read again after a wait growing per failure, and loading still completes", async () => {
    const table = tableOf(range(1n, 30));
    let failuresLeft = 2;
    const failures: number[] = [];
    const flaky: Pick<UserStore, "idRunsAfter"> = {
      async idRunsAfter(after, maxIds) {
        if (after > 0n && failuresLeft-- > 0) throw new Error("connection lost");
        return table.idRunsAfter(after, maxIds);
      },
    };
    const directory = startUserDirectory({
      known: new KnownUsers(),
      users: flaky,
      announcements: null,
      pageIds: 10,
      retryMs: 1,
      onLoadFailure: (_err, retryInMs) => failures.push(retryInMs),
    });
    expect(await directory.loaded).toMatchObject({ ids: 30, runs: 1 });
    expect(failures).toEqual([1, 2]);
    await directory.close();
  });

  it("when it is closed while a page is read, then that page is awaited, no other starts, and loaded resolves with null", async () => {
    let release: () => void = () => {};
    let reads = 0;
    const blocked: Pick<UserStore, "idRunsAfter"> = {
      async idRunsAfter(after) {
        reads++;
        await new Promise<void>((resolve) => (release = resolve));
        return [{ first: after + 1n, last: after + 10n }];
      },
    };
    const directory = startUserDirectory({ known: new KnownUsers(), users: blocked, announcements: null, pageIds: 10 });
    await new Promise((resolve) => setImmediate(resolve));
    let closed = false;
    const closing = directory.close().then(() => (closed = true));
    await new Promise((resolve) => setImmediate(resolve));
    expect(closed).toBe(false);
    release();
    await closing;
    expect(await directory.loaded).toBeNull();
    expect(reads).toBe(1);
  });

  it("when a failing page waits to be read again and the directory closes, then the wait ends at once", async () => {
    const failing: Pick<UserStore, "idRunsAfter"> = {
      async idRunsAfter() {
        throw new Error("PostgreSQL is down");
      },
    };
    const directory = startUserDirectory({ known: new KnownUsers(), users: failing, announcements: null, retryMs: 60_000 });
    await new Promise((resolve) => setImmediate(resolve));
    const startedAt = Date.now();
    await directory.close();
    expect(Date.now() - startedAt).toBeLessThan(1_000);
    expect(await directory.loaded).toBeNull();
  });

  it("when a user is announced, then they are known at once, before loading is done, and closing stops listening", async () => {
    const announcements = fakeAnnouncements();
    let release: () => void = () => {};
    const slow: Pick<UserStore, "idRunsAfter"> = {
      idRunsAfter: () => new Promise<IdRun[]>((resolve) => (release = () => resolve([{ first: 1n, last: 5n }]))),
    };
    const known = new KnownUsers();
    const directory = startUserDirectory({ known, users: slow, announcements });
    await new Promise((resolve) => setImmediate(resolve));
    announcements.hear(77n);
    expect(directory.knows(77n)).toBe(true);
    expect(known.loaded).toBe(false);
    const closing = directory.close();
    release();
    await closing;
    expect(announcements.stopped).toBe(true);
  });
});
