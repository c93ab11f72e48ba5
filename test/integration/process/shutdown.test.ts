// The service as a process: it serves, then stops cleanly on SIGTERM.
import { describe, expect, it } from "vitest";
import { graphqlClient, testConfig } from "../../support/env.js";
import { startServiceProcess } from "../../support/service-process.js";

describe("service process", () => {
  it("when it gets SIGTERM while serving, then it closes its connections and exits 0", async () => {
    const service = await startServiceProcess(testConfig());
    const res = await graphqlClient(service.url)(`{ __typename }`);
    expect(res.data).toEqual({ __typename: "Query" });

    const started = Date.now();
    const code = await service.stop("SIGTERM");
    expect(code).toBe(0);
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(service.output()).toContain('"msg":"stopped"');
  });
});
