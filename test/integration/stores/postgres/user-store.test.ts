import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "../../../../src/stores/postgres/database.js";
import { createUserStore } from "../../../../src/stores/postgres/user-store.js";
import { createUsers, openDatabase, testConfig } from "../../../support/env.js";

let db: Database;

beforeAll(() => {
  db = openDatabase();
});
afterAll(async () => {
  await db.$disconnect();
});

describe("the ids of existing users, in runs", () => {
  it("when ids are read in pages, then each page holds at most its size of the lowest ids above `after`, folded into runs across gaps", async () => {
    const users = await createUsers(db, testConfig(), 10);
    const ids = users.map((u) => u.id);
    const [first, , , third, fourth, , , , , last] = ids as [bigint, bigint, bigint, bigint, bigint, bigint, bigint, bigint, bigint, bigint];
    expect(last - first).toBe(9n);
    // Users are never deleted by the service; deleting two of this test's own makes the gaps a failed insert would.
    await db.user.deleteMany({ where: { id: { in: [third, fourth] } } });
    const store = createUserStore(db);
    expect(await store.idRunsAfter(first - 1n, 5)).toEqual([
      { first, last: third - 1n },
      { first: fourth + 1n, last: fourth + 2n },
    ]);
    expect(await store.idRunsAfter(fourth + 2n, 3)).toEqual([{ first: fourth + 3n, last: fourth + 5n }]);
    // The newest ids: fewer than asked for, which tells the reader it has reached the end.
    expect(await store.idRunsAfter(last - 2n, 1_000)).toEqual([{ first: last - 1n, last }]);
  });
});
