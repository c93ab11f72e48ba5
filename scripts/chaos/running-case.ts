// One case of the fault suite while it runs: the suite's instances and options it
// runs with, and the state its steps (start, warm, inject, recover, check,
// report) share.
import type { ChaosCase } from "./case.js";
import type { Figure } from "./figures.js";
import type { LoadOptions, LoadRun } from "./load.js";
import type { PostgresInstance } from "./postgres-instance.js";
import type { RabbitVhost } from "./rabbitmq-vhost.js";

export const partitions = 1024;
export const jwtSecret = "chaos-secret-not-for-production-use";

/** The suite's instances, which every case makes its own database and queues in. */
export interface Instances {
  readonly postgres: PostgresInstance;
  readonly vhost: RabbitVhost;
  readonly runTag: string;
}

/** The suite's options a case runs with. */
export interface CaseSettings {
  /** Where logs and findings go, one folder per case. */
  readonly directory: string;
  /** The broker the suite makes its vhost on (never restarted). */
  readonly amqpUrl: string;
  readonly load?: Partial<LoadOptions>;
  /** Scales every case's load duration (the vitest run uses shorter loads). */
  readonly loadScale?: number;
  readonly settleTimeoutMs?: number;
  /** Settings for the service on top of the suite's and the case's. */
  readonly serviceEnv?: Readonly<Record<string, string>>;
}

export interface RunningCase {
  readonly c: ChaosCase;
  readonly instances: Instances;
  readonly settings: CaseSettings;
  /** The case's folder of logs and findings. */
  readonly directory: string;
  readonly started: number;
  readonly progress: (line: string) => void;
  readonly timeline: string[];
  readonly figures: Figure[];
  /** Run in reverse order once the case ends, whatever happened. */
  readonly cleanup: (() => Promise<unknown>)[];
  readonly casePosts: Set<string>;
  /** Milliseconds since the load started: zero until it has. */
  elapsedMs: () => number;
  load: LoadRun | undefined;
}

/** Notes a step of the case in its timeline, at its time into the load. */
export function note(run: RunningCase, event: string): void {
  run.timeline.push(`${(run.elapsedMs() / 1000).toFixed(2)} s  ${event}`);
  run.progress(event);
}
