// How the service's entry points run outside the tests: compiled, as `npm start` runs them.
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { projectRoot } from "../../src/stores/postgres/schema-engine.js";

/**
 * How to run one of the service's entry points (`start`, `api`, `worker`, `reconcile`) as
 * `npm start` does: compiled (dist/, built first, incrementally, unless `build` is
 * false), or through tsx for a checkout of an earlier version, which had no build.
 * Earlier versions kept their entry points at the top of src/ (npm start's as server.ts).
 * The build runs synchronously: nothing else of the calling process runs meanwhile.
 */
export function entryArgs(name: string, directory = projectRoot, build = true): string[] {
  const inMain = existsSync(path.join(directory, "src", "main"));
  const file = inMain ? `main/${name}` : name === "start" ? "server" : name;
  if (!existsSync(path.join(directory, "scripts", "build.sh"))) return ["--import", "tsx/esm", `src/${file}.ts`];
  if (build) execFileSync("bash", ["scripts/build.sh"], { cwd: directory, stdio: ["ignore", 2, 2] });
  return [`dist/${file}.js`];
}
