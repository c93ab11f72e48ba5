// The service as a process: it serves, then stops cleanly on SIGTERM.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { describe, expect, inject, it } from "vitest";
import { graphqlClient } from "../../support/env.js";

describe("service process", () => {
  it("when it gets SIGTERM while serving, then it closes its connections and exits 0", async () => {
    const child = spawn("node_modules/.bin/tsx", ["src/server.ts"], {
      env: { ...process.env, REDIS_URL: inject("redisUrl"), PORT: "0", LOG_LEVEL: "info", JWT_SECRET: "test-secret-of-sufficient-length" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`server did not start:\n${output}`)), 30_000);
      child.stdout.on("data", () => {
        const match = /"url":"(http:[^"]+)"/.exec(output);
        if (match?.[1]) {
          clearTimeout(timer);
          resolve(match[1]);
        }
      });
    });
    const res = await graphqlClient(url.replace(/graphql$/, ""))(`{ __typename }`);
    expect(res.data).toEqual({ __typename: "Query" });

    const started = Date.now();
    child.kill("SIGTERM");
    const [code] = (await once(child, "exit")) as [number | null];
    expect(code).toBe(0);
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(output).toContain('"msg":"stopped"');
  });
});
