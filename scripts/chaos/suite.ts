// Runs fault cases, each on fresh private instances: its own Redis (behind a
// TCP proxy), its own database in the suite's PostgreSQL cluster, its own queue
// names in the suite's RabbitMQ vhost (behind a proxy), and the service started
// from src/ as users start it. Returns what each case found; the caller prints.
import { mkdirSync } from "node:fs";
import type { CaseResult } from "./case-result.js";
import { cases as allCases } from "./cases.js";
import { startPostgresInstance } from "./postgres-instance.js";
import { createRabbitVhost } from "./rabbitmq-vhost.js";
import { runCase } from "./run-case.js";
import type { CaseSettings } from "./running-case.js";
import { buildEntries } from "./service-process.js";

export const caseNames = allCases.map((c) => c.name);

export interface SuiteOptions extends CaseSettings {
  readonly cases?: readonly string[];
  /** The PostgreSQL server to fall back on when no private cluster can be made (never restarted). */
  readonly sharedDatabaseUrl: string;
  readonly progress?: (line: string) => void;
}

export async function runChaos(options: SuiteOptions): Promise<CaseResult[]> {
  const chosen = options.cases?.length ? allCases.filter((c) => options.cases?.includes(c.name)) : allCases;
  const unknown = (options.cases ?? []).filter((n) => !caseNames.includes(n));
  if (unknown.length) throw new Error(`Unknown case ${unknown.join(", ")}; the cases are ${caseNames.join(", ")}.`);
  const progress = options.progress ?? (() => {});
  const runTag = `chaos_${process.pid}_${Date.now().toString(36)}`;
  mkdirSync(options.directory, { recursive: true });
  progress("building the service");
  buildEntries();
  progress("starting a private PostgreSQL cluster and a RabbitMQ vhost");
  const postgres = await startPostgresInstance(options.sharedDatabaseUrl, runTag);
  const vhost = await createRabbitVhost(options.amqpUrl, runTag);
  const results: CaseResult[] = [];
  try {
    for (const [i, c] of chosen.entries()) {
      const label = `case ${i + 1}/${chosen.length} ${c.name}`;
      results.push(await runCase(c, { postgres, vhost, runTag }, options, (line) => progress(`${label}: ${line}`)));
    }
  } finally {
    await vhost.remove();
    await postgres.stop();
  }
  return results;
}
