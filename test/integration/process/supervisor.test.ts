// npm start's process layout: API processes on one port, the pipeline once beside
// them, a dead process replaced, and every process gone after a stop.
import { execFileSync } from "node:child_process";
import { Agent, request } from "node:http";
import { describe, expect, it } from "vitest";
import { freePort } from "../../../scripts/lib/ports.js";
import { graphqlClient, testConfig } from "../../support/env.js";
import { eventually } from "../../support/pipeline.js";
import { startServiceProcess, type ServiceProcess } from "../../support/service-process.js";

/** Pids of the log lines with message `msg`, in order. */
function pidsOf(service: ServiceProcess, msg: string): number[] {
  return service
    .output()
    .split("\n")
    .filter((line) => line.includes(`"msg":"${msg}"`))
    .map((line) => Number(/"pid":(\d+)/.exec(line)?.[1]));
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** `{ __typename }` over a connection of `agent`; the body answered. */
function post(url: string, agent: Agent): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(new URL("graphql", url), { method: "POST", agent, headers: { "content-type": "application/json" } }, (res) => {
      let body = "";
      res.on("data", (chunk: Buffer) => (body += chunk.toString()));
      res.on("end", () => resolve(body));
    });
    req.on("error", reject);
    req.end(JSON.stringify({ query: "{ __typename }" }));
  });
}

/** Waits until every process has started; their pids. */
async function readyProcesses(service: ServiceProcess, apiProcesses: number, pipelines = 1): Promise<{ api: number[]; pipeline: number[] }> {
  const ready = () => pidsOf(service, "API process ready").length >= apiProcesses && pidsOf(service, "pipeline running").length >= pipelines;
  await eventually(
    async () => ready(),
    30_000,
    () => service.output(),
  );
  return { api: pidsOf(service, "API process ready"), pipeline: pidsOf(service, "pipeline running") };
}

describe("npm start's processes", () => {
  it("when it runs two API processes, then both serve the port, the pipeline runs once, and SIGTERM stops every one", async () => {
    const service = await startServiceProcess(testConfig(), { WEB_CONCURRENCY: "2" });
    const { api, pipeline } = await readyProcesses(service, 2);
    expect(new Set(api).size).toBe(2);
    expect(pipeline).toHaveLength(1);
    expect(api).not.toContain(service.child.pid);

    // Twenty connections held open: the port hands them out over the API processes.
    const agent = new Agent({ keepAlive: true, maxSockets: 20 });
    const answers = await Promise.all(Array.from({ length: 20 }, () => post(service.url, agent)));
    expect(answers.every((a) => a === '{"data":{"__typename":"Query"}}\n')).toBe(true);
    const owners = new Set(
      execFileSync("ss", ["-Htnp", "state", "established", "sport", "=", `:${new URL(service.url).port}`], { encoding: "utf8" })
        .split("\n")
        .flatMap((line) => [...line.matchAll(/pid=(\d+)/g)].map((m) => Number(m[1]))),
    );
    agent.destroy();
    expect([...owners].sort()).toEqual([...api].sort());

    expect(await service.stop("SIGTERM")).toBe(0);
    expect([...api, ...pipeline].filter(alive)).toEqual([]);
    expect(service.output()).toContain('"name":"supervisor"');
    expect(pidsOf(service, "stopped")).toEqual(expect.arrayContaining([...api, ...pipeline, service.child.pid]));
  });

  it("when an API process dies, then another takes its place and the port keeps answering", async () => {
    const service = await startServiceProcess(testConfig(), { WEB_CONCURRENCY: "2", PIPELINE: "off" });
    try {
      const { api } = await readyProcesses(service, 2, 0);
      process.kill(api[0] as number, "SIGKILL");
      await eventually(
        async () => pidsOf(service, "API process ready").length >= 3,
        30_000,
        () => service.output(),
      );
      expect(service.output()).toContain('"msg":"process died; starting another"');
      const gql = graphqlClient(service.url);
      const answers = await Promise.all(Array.from({ length: 20 }, () => gql(`{ __typename }`)));
      expect(answers.every((a) => a.data?.__typename === "Query")).toBe(true);
    } finally {
      expect(await service.stop("SIGTERM")).toBe(0);
    }
  });

  it("when its only process dies, then the supervisor stays and starts another", async () => {
    // A port of its own: with port 0 a new process would listen elsewhere once the last one is gone.
    const service = await startServiceProcess(testConfig(), { WEB_CONCURRENCY: "1", PIPELINE: "off", PORT: String(await freePort()) });
    try {
      const { api } = await readyProcesses(service, 1, 0);
      process.kill(api[0] as number, "SIGKILL");
      await eventually(
        async () => pidsOf(service, "API process ready").length >= 2,
        30_000,
        () => service.output(),
      );
      expect(service.child.exitCode).toBeNull();
      expect((await graphqlClient(service.url)(`{ __typename }`)).data?.__typename).toBe("Query");
    } finally {
      expect(await service.stop("SIGTERM")).toBe(0);
    }
  });

  it("when the supervisor itself is killed, then its API and pipeline processes do not outlive it", async () => {
    const service = await startServiceProcess(testConfig(), { WEB_CONCURRENCY: "2" });
    const { api, pipeline } = await readyProcesses(service, 2);
    await service.stop("SIGKILL");
    await eventually(
      async () => [...api, ...pipeline].every((pid) => !alive(pid)),
      15_000,
      () => `still alive: ${[...api, ...pipeline].filter(alive).join(", ")}`,
    );
  });
});
