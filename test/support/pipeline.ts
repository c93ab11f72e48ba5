// A running persistence pipeline on the test services, and ways to wait for it.
import { setTimeout as sleep } from "node:timers/promises";
import { compose } from "../../src/compose.js";
import type { Config } from "../../src/config.js";
import type { PipelineHooks, RunningPipeline } from "../../src/pipeline/pipeline.js";
import { openClients } from "../../src/stores/clients.js";
import { silentLogger } from "./env.js";

export interface TestPipeline extends RunningPipeline {
  /** Stops the pipeline and closes its clients. */
  stop(): Promise<void>;
}

export async function startTestPipeline(config: Config, hooks: PipelineHooks = {}): Promise<TestPipeline> {
  const clients = await openClients(config, silentLogger, { rabbit: true, relay: true });
  const pipeline = await compose(config, clients, silentLogger).startPipeline(hooks);
  return {
    ...pipeline,
    async stop() {
      await pipeline.close();
      await clients.close();
    },
  };
}

/** Polls `check` until it returns true; fails with `describe()` after `timeoutMs`. */
export async function eventually(check: () => Promise<boolean>, timeoutMs: number, describe: () => Promise<string> | string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`not reached within ${timeoutMs / 1000} s: ${await describe()}`);
    await sleep(100);
  }
}
