// A progress bar on stderr for the bench's long loads, so stdout holds only the figures.
import { SingleBar, Presets } from "cli-progress";

/** A bar that appears at its first update, when the total is known. */
export function progressBar(label: string) {
  const bar = new SingleBar(
    { format: `${label} [{bar}] {value}/{total} | {eta_formatted} left`, etaBuffer: 50, stream: process.stderr },
    Presets.shades_classic,
  );
  let started = false;
  return {
    update(done: number, total: number) {
      if (!started) bar.start(total, 0);
      started = true;
      bar.setTotal(total);
      bar.update(done);
    },
    stop: () => started && bar.stop(),
  };
}
