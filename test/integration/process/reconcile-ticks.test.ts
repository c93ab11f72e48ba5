// Two workers on the reconcile schedule, as a deployment scaled out runs them: each tick is
// claimed once and its pass runs on one worker. The passes sweep all of the worker's database,
// so the file starts from empty tables: a pass over what earlier files left could outlast its tick.
import { afterAll, expect, it } from "vitest";
import { testConfig } from "../../support/env.js";
import { eventually } from "../../support/pipeline.js";
import { startWorkerProcess, type ServiceProcess } from "../../support/service-process.js";
import { useStores } from "../../support/stores.js";

useStores(() => {}, { fresh: true });

const config = testConfig();
const workers: ServiceProcess[] = [];

async function startWorker(): Promise<ServiceProcess> {
  const worker = await startWorkerProcess(config, { RECONCILE_CRON: "* * * * * *", REDIS_DURABILITY: "volatile" });
  workers.push(worker);
  return worker;
}

afterAll(async () => {
  await Promise.all(workers.splice(0).map((w) => w.stop("SIGTERM")));
});

it("when two workers run the reconcile schedule every second, then each tick runs one pass, on one worker", async () => {
  const pair = [await startWorker(), await startWorker()];
  /** The schedule's log lines of each worker: the tick each was about, and what it said. */
  const lines = () =>
    pair.map((worker) =>
      worker
        .output()
        .split("\n")
        .filter((line) => line.includes('"component":"reconcile"'))
        .map((line) => JSON.parse(line) as { msg: string; tick?: string; next?: string }),
    );
  // Ticks both workers were scheduled for: from the later one's first.
  const shared = () =>
    lines()
      .map((own) => own.find((l) => l.next)?.next ?? "~")
      .sort()
      .at(-1) as string;
  const started = () =>
    lines().flatMap((own, w) =>
      own.filter((l) => l.msg === "reconcile pass started" && (l.tick as string) >= shared()).map((l) => ({ w, tick: l.tick as string })),
    );
  await eventually(
    async () => started().length >= 5,
    30_000,
    () => JSON.stringify(lines()),
  );
  await Promise.all(workers.splice(0).map((w) => w.stop("SIGTERM")));
  // The newest tick aside: the other worker may not have come to it when both stopped.
  const newest = started()
    .map((p) => p.tick)
    .sort()
    .at(-1);
  const passes = started().filter((p) => p.tick !== newest);
  expect(new Set(passes.map((p) => p.tick)).size).toBe(passes.length);
  // The other worker found each of those ticks taken, where it came to them: a loaded machine
  // may hold a worker's timer back by more than a tick, and croner then skips the ticks it missed.
  const cameTo = (w: number, tick: string) => (lines()[w] ?? []).some((l) => l.tick === tick);
  const checked = passes.filter(({ w, tick }) => cameTo(1 - w, tick));
  expect(checked.length).toBeGreaterThanOrEqual(3);
  for (const { w, tick } of checked) {
    expect({ tick, other: lines()[1 - w]?.find((l) => l.tick === tick)?.msg }).toEqual({
      tick,
      other: "reconcile pass skipped: another worker took this tick",
    });
  }
});
