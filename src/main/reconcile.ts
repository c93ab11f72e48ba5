// Entry point of `npm run reconcile`: one full reconcile pass with a progress
// bar, a summary, then exit. The repairs it finds go out as repair messages; a
// running worker (or npm start) applies them.
import { Presets, SingleBar } from "cli-progress";
import { compose } from "../compose.js";
import { createLogger } from "../process/logger.js";
import { stuckAfterPasses } from "../domain/reconcile.js";
import type { TargetTally } from "../pipeline/reconcile-pass.js";
import { exitAfterFailedStart, loadConfigOrRefuse } from "../process/start-up.js";
import { openClients } from "../stores/clients.js";

const tally = (t: TargetTally) => (t.count === 0 ? "0" : `${t.count}: ${t.sample.join(" ")}${t.count > t.sample.length ? " …" : ""}`);

const phaseLabels = { redis: "Redis     ", postgres: "PostgreSQL", counters: "Counters  ", lists: "Lists     " } as const;

const config = loadConfigOrRefuse("reconcile");
const logger = createLogger(config.logLevel === "info" ? "warn" : config.logLevel, "reconcile", {}, { pretty: !config.production });
const clients = await openClients(config, logger, { rabbit: true }).catch((error: unknown) => exitAfterFailedStart(logger, error));
const bar = new SingleBar({ format: "{phase} [{bar}] {value}/{total} targets | {eta_formatted} left", etaBuffer: 20 }, Presets.shades_classic);
let phase = "";
try {
  const summary = await compose(config, clients, logger).reconcileOnce((progress) => {
    const label = phaseLabels[progress.phase];
    if (phase !== progress.phase) {
      if (phase) bar.stop();
      phase = progress.phase;
      bar.start(progress.total, 0, { phase: label });
    }
    bar.setTotal(progress.total);
    bar.update(progress.done, { phase: label });
  });
  if (phase) bar.stop();
  const d = summary.differences;
  console.log(
    [
      `Reconcile pass finished in ${summary.seconds.toFixed(1)} s (${Math.round(summary.targetsChecked / Math.max(summary.seconds, 0.001))} targets/s).`,
      `  targets checked          ${summary.targetsChecked}`,
      `  skipped, changes in flight ${tally(summary.inFlight)}`,
      `    stuck for ${stuckAfterPasses} passes  ${tally(summary.stuck)}`,
      `  lacking changes, rebuilt  ${tally(summary.rebuiltBehind)}`,
      `  lacking changes, kept     ${tally(summary.behindKept)}`,
      `  compared in pieces        ${summary.walked}`,
      `  likes missing in PostgreSQL ${d.missingInDatabase}`,
      `  stray likes in PostgreSQL   ${d.strayInDatabase}`,
      `  PostgreSQL counters wrong   ${d.databaseCounter}`,
      `  Redis counters wrong        ${d.redisCounter}`,
      `  repairs sent             ${summary.repairsSent} (applied by the running worker)`,
      `  cold targets evicted     ${summary.evicted}`,
      `  lists checked            ${summary.listsChecked}`,
      `  lists differing, dropped ${d.list}`,
    ].join("\n"),
  );
} finally {
  await clients.close();
}
