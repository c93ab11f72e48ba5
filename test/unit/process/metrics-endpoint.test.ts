// The routes of METRICS_PORT: /metrics for Prometheus, /health/live for the liveness
// probe of a process that has no other port (the worker).
import type { Server } from "node:http";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { freePort } from "../../../scripts/lib/ports.js";
import { serveMetrics, type MetricsSource } from "../../../src/process/metrics-endpoint.js";

const logger = pino({ level: "silent" });

/** A source that answers `body`, or fails when `body` is an Error, counting its collections. */
function source(body: string | Error): MetricsSource & { collections: number } {
  const counted = {
    contentType: "text/plain; version=0.0.4; charset=utf-8",
    collections: 0,
    async metrics() {
      counted.collections++;
      if (body instanceof Error) throw body;
      return body;
    },
  };
  return counted;
}

describe("metrics endpoint", () => {
  let server: Server | null = null;
  afterEach(async () => {
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    server = null;
  });

  async function serve(from: MetricsSource): Promise<string> {
    const port = await freePort();
    server = await serveMetrics(from, "127.0.0.1", port, logger);
    return `http://127.0.0.1:${port}`;
  }

  it("when /health/live is asked, then it answers 200 without collecting metrics, even while collection fails", async () => {
    const failing = source(new Error("registry broken"));
    const url = await serve(failing);

    const live = await fetch(`${url}/health/live`);
    const metrics = await fetch(`${url}/metrics`);

    expect(live.status).toBe(200);
    expect(await live.json()).toEqual({ status: "live" });
    expect(metrics.status).toBe(500);
    expect(failing.collections).toBe(1);
  });

  it("when /metrics is asked, then it answers the source's text, and any other path answers 404", async () => {
    const url = await serve(source("likes_outbox_length 0\n"));

    const metrics = await fetch(`${url}/metrics`);
    const other = await fetch(`${url}/health/ready`);

    expect(metrics.status).toBe(200);
    expect(metrics.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
    expect(await metrics.text()).toBe("likes_outbox_length 0\n");
    expect(other.status).toBe(404);
  });
});
