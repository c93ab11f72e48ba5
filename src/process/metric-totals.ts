// Prometheus counters of totals a part of the process keeps itself, read at each scrape.
import { Counter, type Registry } from "prom-client";

/** A counter that reports a total the process keeps itself, read at each scrape. */
export function totalCounter(registry: Registry, name: string, help: string, read: () => number): void {
  let reported = 0;
  new Counter({
    name,
    help,
    registers: [registry],
    collect() {
      const total = read();
      this.inc(total - reported);
      reported = total;
    },
  });
}
