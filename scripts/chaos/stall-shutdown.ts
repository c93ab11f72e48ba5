// stall-shutdown: SIGTERM to npm start's supervisor while Redis is stalled
// (SIGSTOP). Every process must be gone within 10 s with exit code 0: what the
// outbox holds stays in Redis for the next start, so nothing waits on a Redis
// that does not answer. Redis then resumes, npm start runs again, and the
// check proves nothing acknowledged was lost.
import { setTimeout as sleep } from "node:timers/promises";
import { createRedisKeys } from "../../src/stores/redis/keys.js";
import { at, type ChaosCase } from "./case.js";
import { groupOf } from "./service-process.js";
import { outboxLength } from "./settle.js";

const stallAtMs = 2_000;
const termAfterMs = 1_000;
const targetMs = 10_000;
/** How long the case waits for the processes before it kills what is left. */
const giveUpMs = 40_000;

export const stallShutdown: ChaosCase = {
  name: "stall-shutdown",
  summary: `Redis frozen (SIGSTOP), then SIGTERM to npm start's supervisor ${termAfterMs / 1000} s later; Redis resumes once every process is gone (or after ${giveUpMs / 1000} s), and npm start runs again`,
  layout: "npm start",
  redisAppendOnly: true,
  // Views answered since the last flush before the stall cannot reach Redis before the processes stop.
  viewsMayBeLost: { from: "Redis SIGSTOP", to: "service stopped" },
  loadSeconds: 4,
  async inject(ctx) {
    const server = ctx.process("start");
    let code: number | null | undefined;
    void server.exited.then((c) => (code = c));
    try {
      await at(ctx, stallAtMs);
      ctx.note("Redis SIGSTOP");
      ctx.redis.freeze();
      await at(ctx, stallAtMs + termAfterMs);
      const processes = groupOf(server).length;
      process.kill(server.pid, "SIGTERM");
      const termMs = ctx.elapsedMs();
      ctx.note(`SIGTERM to npm start's supervisor (${processes} processes)`);
      let left = groupOf(server);
      while (left.length > 0 && ctx.elapsedMs() - termMs < giveUpMs) {
        await sleep(50);
        left = groupOf(server);
      }
      const goneMs = ctx.elapsedMs() - termMs;
      if (left.length > 0) {
        ctx.note(`still running after ${giveUpMs / 1000} s: ${left.map((p) => p.command).join("; ")}; killed`);
        await server.stop(0);
      }
      ctx.note("service stopped");
      await Promise.race([server.exited, sleep(1_000)]);
      ctx.figure({
        name: "every process gone after SIGTERM",
        value: left.length > 0 ? `not within ${giveUpMs / 1000} s (${left.length} left)` : `${(goneMs / 1000).toFixed(1)} s`,
        target: { text: `≤ ${targetMs / 1000} s`, met: left.length === 0 && goneMs <= targetMs },
      });
      ctx.figure({
        name: "npm start's exit code",
        value: code === undefined ? "still running" : code === null ? "killed by a signal" : String(code),
        target: { text: "0", met: code === 0 },
      });
    } finally {
      ctx.redis.thaw();
    }
    ctx.note("Redis SIGCONT");
    const waiting = await outboxLength(ctx.redisClient, createRedisKeys(ctx.partitions).outboxes());
    ctx.note(`npm start started again (${waiting} outbox entries waiting in Redis)`);
    await ctx.restart("start");
    await sleep(3_000);
  },
};
