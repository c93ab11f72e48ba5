// Automatic persisted queries under npm start's process layout: two API processes
// sharing the port, one of them killed and started again by the supervisor, and a
// client that opens a new connection for every request, so that its requests land
// on both processes and on the new one.
import { describe, expect, it } from "vitest";
import { testConfig } from "../../support/env.js";
import { eventually } from "../../support/pipeline.js";
import { persistedQuery } from "../../support/persisted-queries.js";
import { startServiceProcess, type ServiceProcess } from "../../support/service-process.js";

const readyPids = (service: ServiceProcess) =>
  service
    .output()
    .split("\n")
    .filter((line) => line.includes('"msg":"API process ready"'))
    .map((line) => Number(/"pid":(\d+)/.exec(line)?.[1]));

describe("persisted queries across npm start's API processes", () => {
  it("when a client opens a new connection for every request, then after one registration every request is a hit, on every API process and after one restarts", async () => {
    const service = await startServiceProcess(testConfig(), { WEB_CONCURRENCY: "2", PIPELINE: "off" });
    const query = `query HotAcrossProcesses { hotPosts(first: 7, window: ALL) { id counts { likes } } }`;
    try {
      await eventually(
        async () => readyPids(service).length >= 2,
        30_000,
        () => service.output(),
      );
      expect((await persistedQuery(service.url, query)).hit).toBe(false);
      let hits = 0;
      let requests = 0;
      const ask = async (count: number) => {
        for (let i = 0; i < count; i++, requests++) {
          const { hit, response } = await persistedQuery(service.url, query);
          expect(response.errors).toBeUndefined();
          if (hit) hits++;
        }
      };
      await ask(100);
      // The supervisor starts another API process in its place, which has seen no query.
      process.kill(readyPids(service)[0] as number, "SIGKILL");
      await eventually(
        async () => readyPids(service).length >= 3,
        30_000,
        () => service.output(),
      );
      await ask(100);
      expect({ hits, requests }).toEqual({ hits: 200, requests: 200 });
    } finally {
      await service.stop("SIGTERM");
    }
  });
});
