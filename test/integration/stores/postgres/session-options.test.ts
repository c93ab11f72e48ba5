// The service's own session settings (jit=off) and an operator's (DATABASE_URL's
// ?options=, PGOPTIONS) reach a real PostgreSQL session together: pg would let
// either replace the other.
import { describe, expect, it } from "vitest";
import { createDatabase } from "../../../../src/stores/postgres/database.js";
import { testConfig } from "../../../support/env.js";

const settingsOf = async (url: string) => {
  const db = createDatabase({ url, poolSize: 1 });
  try {
    const [row] = await db.$queryRaw<{ jit: string; search_path: string; work_mem: string }[]>`
      SELECT current_setting('jit') AS jit, current_setting('search_path') AS search_path, current_setting('work_mem') AS work_mem`;
    return row;
  } finally {
    await db.$disconnect();
  }
};

describe("session options", () => {
  it("when DATABASE_URL carries options of its own, then the session has those and jit off", async () => {
    const url = new URL(testConfig().databaseUrl);
    url.searchParams.set("options", "-c search_path=public,pg_catalog -c work_mem=7MB");
    expect(await settingsOf(url.toString())).toEqual({ jit: "off", search_path: "public,pg_catalog", work_mem: "7MB" });
  });

  it("when PGOPTIONS gives options, then the session has those and jit off", async () => {
    expect(await settingsOf(testConfig({ PGOPTIONS: "-c work_mem=9MB" }).databaseUrl)).toMatchObject({ jit: "off", work_mem: "9MB" });
  });
});
