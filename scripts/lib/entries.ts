// How the service's entry points run outside the tests: compiled, as `npm start` runs them.
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { projectRoot } from "../../src/stores/postgres/schema-engine.js";

/**
 * How to run one of the service's entry points (`server`, `worker`, `reconcile`) as
 * `npm start` does: compiled (dist/, built first, incrementally, unless `build` is
 * false), or through tsx for a checkout of an earlier version, which had no build.
 * The build runs synchronously: nothing else of the calling process runs meanwhile.
 */
export function entryArgs(name: string, directory = projectRoot, build = true): string[] {
  if (!existsSync(path.join(directory, "scripts", "build.sh"))) return ["--import", "tsx/esm", `src/${name}.ts`];
  if (build) execFileSync("bash", ["scripts/build.sh"], { cwd: directory, stdio: ["ignore", 2, 2] });
  return [`dist/${name}.js`];
}
