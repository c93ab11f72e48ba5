// outage-restart: a Redis outage is ridden out, and so is an API process dying,
// but not both at once if the replacement's failures to reach Redis count as a
// crash loop that stops everything. Redis is unreachable for 60 s (the proxy
// resets every connection and refuses new ones) and one of npm start's API
// processes is killed early in it. A probe on a new connection every 100 ms (so
// it reaches every API process in turn) likes and unlikes a post of its own;
// the service serves again at the first of ten probes in a row answered.
import { setTimeout as sleep } from "node:timers/promises";
import { at, type ChaosCase } from "./case.js";
import { createCast, type CastUser } from "./cast.js";
import { freshRequest } from "./fresh-request.js";
import { defaultLoad, mutations } from "./load.js";
import { groupOf } from "./service-process.js";

const outageFromMs = 2_000;
const outageMs = 60_000;
const killAfterMs = 2_000;
/** How long after Redis's return the case waits for the service at most. */
const giveUpMs = 30_000;
const streak = 10;
const targetMs = 5_000;

let probe: { readonly user: CastUser; readonly postId: string } | null = null;

export const outageRestart: ChaosCase = {
  name: "outage-restart",
  summary: `Redis unreachable for ${outageMs / 1000} s (the proxy resets and refuses connections), one of npm start's API processes kill -9 ${killAfterMs / 1000} s into it`,
  layout: "npm start",
  redisAppendOnly: true,
  // The killed process held every view it answered since it lost Redis: no flush could reach it.
  viewsMayBeLost: { from: "Redis unreachable", to: "kill -9" },
  loadSeconds: 4,
  async prepare(ctx) {
    const cast = await createCast(ctx.api, `${ctx.tag}p`, { ...defaultLoad, authors: 1, likers: 1, posts: 1 });
    probe = { user: cast.likers[0] as CastUser, postId: (cast.posts[0] as { id: string }).id };
    ctx.ownPosts([probe.postId]);
  },
  async inject(ctx) {
    if (!probe) throw new Error("outage-restart ran without its preparation");
    const { user, postId } = probe;
    const server = ctx.process("start");
    const exit = { done: false, code: null as number | null, atMs: 0 };
    void server.exited.then((code) => Object.assign(exit, { done: true, code, atMs: ctx.elapsedMs() }));

    const probes: { atMs: number; error: string | null }[] = [];
    let probing = true;
    const prober = (async () => {
      for (let n = 0; probing; n++) {
        const atMs = ctx.elapsedMs();
        const error = await freshRequest(ctx.api.url, mutations[n % 2 === 0 ? "like" : "unlike"], { id: postId }, user.token);
        probes.push({ atMs, error });
        await sleep(Math.max(0, atMs + 100 - ctx.elapsedMs()));
      }
    })();
    /** When the service served again after `fromMs`: the first of `streak` probes in a row answered. */
    const servedSince = (fromMs: number) => {
      let run = 0;
      for (const [i, p] of probes.entries()) {
        if (p.atMs < fromMs) continue;
        run = p.error === null ? run + 1 : 0;
        if (run === streak) return (probes[i - streak + 1] as { atMs: number }).atMs;
      }
      return null;
    };

    try {
      await at(ctx, outageFromMs);
      ctx.note("Redis unreachable: connections reset, new ones refused");
      ctx.redisProxy.refuse();
      await at(ctx, outageFromMs + killAfterMs);
      const api = groupOf(server).find((p) => p.ppid === server.pid && p.command.includes("api."));
      if (!api) throw new Error("npm start runs no API process to kill");
      process.kill(api.pid, "SIGKILL");
      ctx.note(`API process ${api.pid} kill -9`);
      await at(ctx, outageFromMs + outageMs);
      const running = groupOf(server);
      ctx.redisProxy.resume();
      const backMs = ctx.elapsedMs();
      ctx.note(
        `Redis reachable again; npm start ${exit.done ? `had exited (code ${String(exit.code)})` : `runs ${running.filter((p) => p.command.includes("api.")).length} API processes${running.some((p) => p.command.includes("worker.")) ? " and the pipeline" : ", no pipeline"}`}`,
      );
      let served: number | null = null;
      while (served === null && ctx.elapsedMs() - backMs < giveUpMs) {
        await sleep(200);
        served = servedSince(backMs);
      }
      const errorsAfter = new Map<string, number>();
      for (const p of probes)
        if (p.atMs >= backMs && (served === null || p.atMs < served) && p.error) errorsAfter.set(p.error, (errorsAfter.get(p.error) ?? 0) + 1);
      const firstAnswered = probes.find((p) => p.atMs >= backMs && p.error === null);
      ctx.figure({
        name: "serving again after Redis's return",
        value:
          served === null
            ? `not within ${giveUpMs / 1000} s${exit.done ? `: npm start exited (code ${String(exit.code)}) ${((exit.atMs - outageFromMs) / 1000).toFixed(1)} s into the outage` : ""}`
            : `${((served - backMs) / 1000).toFixed(1)} s (${streak} probes in a row answered from then; first answered after ${firstAnswered ? ((firstAnswered.atMs - backMs) / 1000).toFixed(1) : "?"} s; failed probes before: ${[...errorsAfter].map(([k, n]) => `${k}×${n}`).join(", ") || "none"})`,
        target: { text: `≤ ${targetMs / 1000} s`, met: served !== null && served - backMs <= targetMs },
      });
      if (exit.done) {
        ctx.note("npm start started again, so the check can run");
        await ctx.restart("start");
      }
      await sleep(3_000);
    } finally {
      ctx.redisProxy.resume();
      probing = false;
      await prober;
    }
  },
};
