// npm run chaos [-- <case> ...]
//
// The fault suite: each case runs a load of likes and unlikes through the API
// while one fault is injected into private instances (a Redis, a PostgreSQL
// cluster and a RabbitMQ vhost of the suite's own, with TCP proxies in front of
// Redis and RabbitMQ), then waits for the pipeline to settle and checks every
// acknowledged change against Redis and PostgreSQL. Prints a table; exits 1 when
// a case lost, doubled or drifted (beyond the loss a Redis without AOF is
// expected to have), 2 on bad arguments. Logs and findings stay in a folder
// under the system's temporary directory.
import { tmpdir } from "node:os";
import path from "node:path";
import { loadConfig } from "../../src/config.js";
import { failed } from "./case-result.js";
import { formatEvidence, formatTable } from "./report.js";
import { caseNames, runChaos } from "./suite.js";

const wanted = process.argv.slice(2).filter((a) => a !== "--");
const unknown = wanted.filter((n) => !caseNames.includes(n));
if (unknown.length) {
  console.error(`Unknown case ${unknown.join(", ")}.\nUsage: npm run chaos [-- <case> ...]\nCases: ${caseNames.join(", ")}`);
  process.exit(2);
}

// Node skips exit handlers on a signal it does not handle: exiting instead runs them, and they stop every instance and process of the suite.
for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => process.exit(130));

// The machine's services, as configured for the service: only the broker (for a vhost) and, as a fallback, the PostgreSQL server are used.
const config = loadConfig();
const directory = path.join(tmpdir(), `likes-chaos-${new Date().toISOString().replaceAll(/[:.]/g, "-")}`);
const started = Date.now();
const tty = process.stderr.isTTY;
let lastPrinted = 0;
const progress = (line: string) => {
  const text = `[chaos ${((Date.now() - started) / 1000).toFixed(0).padStart(3)} s] ${line}`;
  if (tty) process.stderr.write(`\r\x1b[K${text.slice(0, (process.stderr.columns || 120) - 1)}`);
  else if (!line.startsWith("load ") || Date.now() - lastPrinted > 5_000) {
    process.stderr.write(`${text}\n`);
    lastPrinted = Date.now();
  }
};

console.error(`Fault suite: ${wanted.length ? wanted.join(", ") : `all ${caseNames.length} cases`}; logs in ${directory}`);
const results = await runChaos({ cases: wanted, directory, amqpUrl: config.amqpUrl, sharedDatabaseUrl: config.databaseUrl, progress });
if (tty) process.stderr.write("\r\x1b[K");
console.log(formatTable(results));
console.log(formatEvidence(results));
console.log(`\n${results.length} cases in ${((Date.now() - started) / 1000).toFixed(0)} s; logs and findings in ${directory}`);
process.exit(results.some(failed) ? 1 : 0);
