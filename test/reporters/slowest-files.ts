// Prints, after a run, the files that took longest, so that a slow file is seen
// where it is added rather than found later in a suite that grew slow.
import path from "node:path";
import type { Reporter, TestModule } from "vitest/node";

/** How many files the list names. */
const shown = 10;

export default class SlowestFiles implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    const files = testModules.map((module) => {
      const { duration, collectDuration, setupDuration } = module.diagnostic();
      return { name: `${module.project.name} ${path.relative(process.cwd(), module.moduleId)}`, seconds: (duration + collectDuration + setupDuration) / 1000 };
    });
    if (files.length < 2) return;
    const slowest = files.sort((a, b) => b.seconds - a.seconds).slice(0, shown);
    const total = files.reduce((sum, file) => sum + file.seconds, 0);
    const lines = slowest.map(({ name, seconds }) => `  ${seconds.toFixed(1).padStart(7)} s  ${name}`);
    process.stdout.write(`\nSlowest files (of ${files.length}, ${total.toFixed(0)} s of files in all):\n${lines.join("\n")}\n`);
  }
}
