// Which PostgreSQL errors say the database did not answer in time (SERVICE_UNAVAILABLE to
// the client) rather than a fault of the statement, produced by a real server and pool.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDatabase, isPostgresUnavailable, prismaCode, type Database } from "../../../../src/stores/postgres/database.js";
import { testConfig } from "../../../support/env.js";

let db: Database;

beforeAll(() => {
  // One connection: a transaction holding it leaves none for the next.
  db = createDatabase({ url: testConfig().databaseUrl, poolSize: 1 });
});
afterAll(async () => {
  await db.$disconnect();
});

describe("PostgreSQL unavailability", () => {
  it("when every connection of the pool is held and a transaction cannot start in time, then the error is unavailability", async () => {
    let release: () => void = () => undefined;
    let held: () => void = () => undefined;
    const holds = new Promise<void>((resolve) => (held = resolve));
    const holding = db.$transaction(async (tx) => {
      await tx.$queryRaw`SELECT 1`;
      held();
      await new Promise<void>((resolve) => (release = resolve));
    });
    await holds;
    const error: unknown = await db
      .$transaction(async (tx) => tx.$queryRaw`SELECT 1`, { maxWait: 100 })
      .then(
        () => null,
        (e: unknown) => e,
      );
    release();
    await holding;
    expect(prismaCode(error)).toBe("P2028");
    expect(isPostgresUnavailable(error)).toBe(true);
  });

  it("when every connection of the pool is held and a query cannot get one in time, then the error is unavailability", async () => {
    const small = createDatabase({ url: testConfig().databaseUrl, poolSize: 1, connectTimeoutMs: 200 });
    try {
      let release: () => void = () => undefined;
      let held: () => void = () => undefined;
      const holds = new Promise<void>((resolve) => (held = resolve));
      const holding = small.$transaction(async (tx) => {
        await tx.$queryRaw`SELECT 1`;
        held();
        await new Promise<void>((resolve) => (release = resolve));
      });
      await holds;
      const error: unknown = await small.$queryRaw`SELECT 1`.then(
        () => null,
        (e: unknown) => e,
      );
      release();
      await holding;
      expect(error).toBeInstanceOf(Error);
      expect({ code: prismaCode(error), message: (error as Error).message, unavailable: isPostgresUnavailable(error) }).toMatchObject({ unavailable: true });
    } finally {
      await small.$disconnect();
    }
  });

  it("when a statement is at fault, then the error is not unavailability", async () => {
    const error: unknown = await db.$queryRawUnsafe("SELECT * FROM no_such_table").then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(Error);
    expect(isPostgresUnavailable(error)).toBe(false);
  });
});
