// One fault case, step by step: start its stores and the service, warm up (the
// load's users and posts, the case's preparation), inject the fault under load,
// recover (let the pipeline settle), check the stores against the history, and
// report what it found.
import { mkdirSync } from "node:fs";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { lossWindow, viewsAllowance } from "./allowed-loss.js";
import type { CaseResult } from "./case-result.js";
import { startService, type CaseService } from "./case-service.js";
import { startCaseStores, type CaseStores } from "./case-stores.js";
import type { ChaosCase, FaultContext } from "./case.js";
import { createCast, type Cast } from "./cast.js";
import { verify, type Verdict } from "./check.js";
import { createFaultContext } from "./fault-context.js";
import { writeFindings } from "./findings.js";
import { defaultLoad, startLoad, type LoadOptions, type LoadRun } from "./load.js";
import { note, partitions, type CaseSettings, type Instances, type RunningCase } from "./running-case.js";
import type { Settling } from "./settle.js";
import { verifyViews, type ViewsVerdict } from "./views-check.js";

const acknowledged = (load: LoadRun) => [...load.pairs.values()].reduce((n, p) => n + p.operations.filter((o) => o.outcome.kind === "acknowledged").length, 0);

const isDirty = (v: Verdict) => v.lost.length > 0 || v.doubledCount > 0 || v.drift.length > 0;

/** The result of a case before (or without) a check. */
function emptyResult(run: RunningCase) {
  return {
    name: run.c.name,
    summary: run.c.summary,
    skipped: null,
    error: null,
    expectsLoss: run.c.expectsLoss ?? null,
    attempted: 0,
    acknowledged: 0,
    verdict: null,
    views: null,
    settling: null,
    failures: new Map<string, number>(),
    maxLatencyMs: 0,
    figures: run.figures,
    timeline: run.timeline,
    directory: run.directory,
    seconds: (Date.now() - run.started) / 1000,
  };
}

interface Warmed {
  readonly ctx: FaultContext;
  readonly cast: Cast;
  readonly loadOptions: LoadOptions;
}

async function warm(run: RunningCase, stores: CaseStores, service: CaseService): Promise<Warmed> {
  run.progress("registering users and writing posts");
  const loadOptions = { ...defaultLoad, ...run.c.load, ...run.settings.load };
  const tag = `c${Date.now().toString(36)}`;
  const cast = await createCast(service.api, tag, loadOptions);
  const ctx = createFaultContext(run, stores, service, cast, tag);
  if (run.c.prepare) {
    run.progress("preparing the case");
    await run.c.prepare(ctx);
  }
  return { ctx, cast, loadOptions };
}

async function inject(run: RunningCase, { ctx, cast, loadOptions }: Warmed): Promise<LoadRun> {
  const loadMs = run.c.loadSeconds * 1000 * (run.settings.loadScale ?? 1);
  const load = startLoad(ctx.api, cast, loadOptions);
  run.load = load;
  run.elapsedMs = load.elapsedMs;
  const ticker = setInterval(() => {
    run.progress(
      `load ${(load.elapsedMs() / 1000).toFixed(0)}/${(loadMs / 1000).toFixed(0)} s, ${load.attempted()} requests, ${acknowledged(load)} acknowledged`,
    );
  }, 1_000);
  try {
    await Promise.all([run.c.inject(ctx), sleep(loadMs)]);
  } finally {
    clearInterval(ticker);
    await load.stop();
  }
  note(run, "load stopped");
  return load;
}

async function recover(run: RunningCase, service: CaseService): Promise<Settling> {
  run.progress("settling: waiting for the outbox and the queues to empty");
  const settling = await service.settle(run.settings.settleTimeoutMs ?? 60_000);
  note(run, settling.settled ? `settled in ${settling.seconds.toFixed(1)} s` : `not settled after ${settling.seconds.toFixed(1)} s: ${settling.left}`);
  return settling;
}

async function check(run: RunningCase, stores: CaseStores, service: CaseService, warmed: Warmed, settling: Settling) {
  const { c } = run;
  const { ctx, cast } = warmed;
  const load = run.load as LoadRun;
  run.progress("checking Redis and PostgreSQL against the history");
  // Opened only now: a connection opened before a PostgreSQL restart would be broken by it.
  const sql = new pg.Client({ connectionString: stores.databaseUrl });
  sql.on("error", () => {});
  await sql.connect();
  run.cleanup.push(() => sql.end().catch(() => undefined));
  if (c.afterSettled) {
    run.progress("measuring the settled stores");
    await c.afterSettled(ctx, sql);
  }
  const redis = stores.redisClient;
  const input = {
    redis,
    partitions,
    sql,
    api: service.api,
    cast,
    pairs: load.pairs,
    casePosts: run.casePosts,
    ...(c.expectsLoss ? { expectedLoss: lossWindow(run.timeline) } : {}),
  };
  const allowance = viewsAllowance(c, run.timeline);
  const checkViews = () => verifyViews(redis, partitions, sql, ctx.hotPostId, load.views, allowance);
  let verdict = await verify(input);
  let views = await checkViews();
  // A difference may be a change still on its way (a command that ran late); only one that stays counts.
  for (let again = 0; again < 2 && (isDirty(verdict) || views.drift !== null || views.lost > views.allowedLost) && settling.settled; again++) {
    await sleep(2_000);
    const resettled = await service.settle(10_000);
    note(run, `checked again after ${resettled.settled ? "settling" : "waiting"} another ${resettled.seconds.toFixed(1)} s`);
    verdict = await verify(input);
    views = await checkViews();
  }
  return { verdict, views };
}

function report(run: RunningCase, found: { settling: Settling; verdict: Verdict; views: ViewsVerdict }): CaseResult {
  const load = run.load as LoadRun;
  const result: CaseResult = {
    ...emptyResult(run),
    attempted: load.attempted(),
    acknowledged: acknowledged(load),
    ...found,
    failures: load.failures,
    maxLatencyMs: load.maxLatencyMs(),
  };
  writeFindings(result);
  return result;
}

function reportError(run: RunningCase, error: unknown): CaseResult {
  const load = run.load;
  const result: CaseResult = {
    ...emptyResult(run),
    error: (error as Error).message,
    ...(load ? { attempted: load.attempted(), failures: load.failures, maxLatencyMs: load.maxLatencyMs() } : {}),
  };
  writeFindings(result);
  return result;
}

export async function runCase(c: ChaosCase, instances: Instances, settings: CaseSettings, progress: (line: string) => void): Promise<CaseResult> {
  const directory = path.join(settings.directory, c.name);
  mkdirSync(directory, { recursive: true });
  const run: RunningCase = {
    c,
    instances,
    settings,
    directory,
    started: Date.now(),
    progress,
    timeline: [],
    figures: [],
    cleanup: [],
    casePosts: new Set(),
    elapsedMs: () => 0,
    load: undefined,
  };
  const skipped = c.unavailable?.(instances.postgres) ?? null;
  if (skipped) return { ...emptyResult(run), skipped, seconds: 0 };
  try {
    const stores = await startCaseStores(run);
    const service = await startService(run, stores);
    const warmed = await warm(run, stores, service);
    await inject(run, warmed);
    const settling = await recover(run, service);
    return report(run, { settling, ...(await check(run, stores, service, warmed, settling)) });
  } catch (error) {
    return reportError(run, error);
  } finally {
    await run.load?.stop();
    progress("stopping the service and the case's instances");
    for (const close of run.cleanup.reverse()) await close().catch(() => undefined);
  }
}
