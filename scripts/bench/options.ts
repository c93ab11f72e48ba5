// The command line of `npm run bench` (main.ts describes each option and scenario).
import { parseArgs } from "node:util";
import { quick, realistic, type DatasetShape } from "./dataset.js";
import type { ServiceMode } from "./harness.js";
import { httpScenarios } from "./scenarios.js";

const all = [...httpScenarios, "live-hot", "likes-20m", "memory", "nested", "persist", "reconcile", "reconcile-big", "scale", "startup"] as const;
export type Scenario = (typeof all)[number];

export interface BenchOptions {
  /** The scenarios named, or the HTTP scenarios and memory when none is. */
  readonly chosen: ReadonlySet<Scenario>;
  /** How the HTTP scenarios start the service, each in turn. */
  readonly modes: readonly ServiceMode[];
  /** `--mode` as given: "npm-start", "api-only" or none. */
  readonly mode: string | undefined;
  /** `--set`'s settings of this checkout's service, KEY and VALUE. */
  readonly settings: readonly [string, string | undefined][];
  readonly shape: DatasetShape;
  readonly durationSeconds: number;
  readonly warmUpSeconds: number;
  readonly profileDir: string | undefined;
  /** The other checkout's directory, as given. */
  readonly against: string | undefined;
  /** The bench's database and RabbitMQ vhost. */
  readonly database: string;
  readonly replica: boolean;
}

/** The options of this process's command line; prints the usage and exits with 2 when they make no sense. */
export function parseOptions(): BenchOptions {
  const { values: flags, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      quick: { type: "boolean", default: false },
      mode: { type: "string" },
      profile: { type: "string" },
      against: { type: "string" },
      database: { type: "string", default: "likes_bench" },
      replica: { type: "boolean", default: false },
      set: { type: "string", multiple: true, default: [] },
    },
  });
  const settings = flags.set.map((pair) => pair.split("=", 2) as [string, string | undefined]);
  const unknown = positionals.filter((s) => !(all as readonly string[]).includes(s));
  const modes: ServiceMode[] =
    flags.mode === undefined ? ["npm start", "API only"] : flags.mode === "npm-start" ? ["npm start"] : flags.mode === "api-only" ? ["API only"] : [];
  if (unknown.length || modes.length === 0 || settings.some(([, value]) => value === undefined)) {
    console.error(
      `Usage: npm run bench -- [--quick] [--mode npm-start|api-only] [--profile dir] [--against dir] [--replica] [--set KEY=VALUE ...] [--database name] [${all.join("|")} ...]`,
    );
    process.exit(2);
  }
  return {
    chosen: new Set<Scenario>(positionals.length ? (positionals as Scenario[]) : [...httpScenarios, "memory"]),
    modes,
    mode: flags.mode,
    settings,
    shape: flags.quick ? quick : realistic,
    durationSeconds: flags.quick ? 5 : 10,
    warmUpSeconds: flags.quick ? 2 : 3,
    profileDir: flags.profile,
    against: flags.against,
    database: flags.database,
    replica: flags.replica,
  };
}
