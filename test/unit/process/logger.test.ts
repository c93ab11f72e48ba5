// Log lines as the terminal and a log collector each see them: pino-pretty's lines
// for a person at a terminal in development, JSON lines everywhere else.
import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";

const logOneLine = (pretty: boolean) =>
  `import { createLogger } from "./src/process/logger.ts"; createLogger("info", "api", {}, { pretty: ${pretty} }).warn({ postId: "7" }, "a warning");`;

/** Runs a module as a child process, its standard output a terminal (util-linux's `script` gives it one) or a pipe. */
function run(source: string, terminal: boolean): string {
  const node = ["node", "--import", "tsx/esm", "--input-type=module", "-e", source];
  if (!terminal) return execFileSync(node[0] as string, node.slice(1), { encoding: "utf8" });
  const quoted = node.map((arg) => `'${arg.replaceAll("'", "'\\''")}'`).join(" ");
  return execFileSync("script", ["-qec", quoted, "/dev/null"], { encoding: "utf8" });
}

describe("log lines", () => {
  it("when standard output is a terminal and pretty lines are asked for, then lines are for people, not JSON", () => {
    const output = run(logOneLine(true), true);
    expect(output).toMatch(/WARN.*\(api\/\d+\).*a warning/);
    expect(output).toMatch(/postId.*"7"/);
    expect(output).not.toContain('"level"');
  });

  it("when standard output is not a terminal, or in production, then each line is JSON", () => {
    for (const [pretty, terminal] of [
      [true, false],
      [false, true],
    ] as const) {
      const line = run(logOneLine(pretty), terminal).trim();
      expect(JSON.parse(line)).toMatchObject({ level: 40, name: "api", postId: "7", msg: "a warning" });
    }
  });
});
