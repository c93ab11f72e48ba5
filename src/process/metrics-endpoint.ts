// Where Prometheus scrapes: one /metrics endpoint per machine on METRICS_PORT.
//
// Under `npm start` several processes share the machine (WEB_CONCURRENCY API
// processes and the pipeline), and only one of them can listen on the port. The
// supervisor listens; at each scrape it asks every child over the IPC channel
// node:cluster and child_process.fork already opened for its registry as JSON
// (prom-client's getMetricsAsJSON), and answers their sum (AggregatorRegistry.
// aggregate: counters and histograms add up, so rates and quantiles come out for
// the whole machine). prom-client's own cluster aggregation reaches only
// node:cluster workers, not the forked pipeline, hence a message of our own.
// A process run alone (`npm run worker`) serves its own registry on the port.
import { createServer, type Server } from "node:http";
import type { Logger } from "pino";
import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue, type Registry } from "prom-client";

/** What an endpoint serves: a registry, or the sum of several. */
export interface MetricsSource {
  readonly contentType: string;
  metrics(): Promise<string>;
}

/** Serves /metrics and /health/live; a port already taken is logged and skipped, never fatal. Port 0 serves nothing. */
export async function serveMetrics(source: MetricsSource, host: string, port: number, logger: Logger): Promise<Server | null> {
  if (port === 0) return null;
  const server = createServer((req, res) => {
    // A liveness probe's target where this is the process's only port (the worker): it answers
    // while the event loop does, without collecting the registry.
    if (req.url === "/health/live") {
      res.writeHead(200, { "content-type": "application/json" }).end('{"status":"live"}');
      return;
    }
    if (req.url !== "/metrics") {
      res.writeHead(404).end();
      return;
    }
    source.metrics().then(
      (body) => res.writeHead(200, { "content-type": source.contentType }).end(body),
      (err: unknown) => {
        logger.error({ err }, "metrics collection failed");
        res.writeHead(500).end();
      },
    );
  });
  return new Promise((resolve) => {
    server.once("error", (err) => {
      logger.warn({ err, port }, "metrics port unavailable; serving no metrics");
      resolve(null);
    });
    server.listen(port, host, () => resolve(server));
  });
}

type Metrics = MetricObjectWithValues<MetricValue<string>>[];

interface MetricsRequest {
  readonly type: "likes:metrics-request";
  readonly id: number;
}

interface MetricsReply {
  readonly type: "likes:metrics-reply";
  readonly id: number;
  readonly metrics: Metrics;
}

const isRequest = (message: unknown): message is MetricsRequest =>
  typeof message === "object" && message !== null && (message as { type?: unknown }).type === "likes:metrics-request";

const isReply = (message: unknown): message is MetricsReply =>
  typeof message === "object" && message !== null && (message as { type?: unknown }).type === "likes:metrics-reply";

/** In a child of the supervisor: answers its scrapes with `registries`' metrics. Returns a function that stops answering. */
export function answerMetricsRequests(registries: readonly Registry[]): () => void {
  const listener = (message: unknown) => {
    if (!isRequest(message) || !process.send) return;
    // With a callback a closed channel (the supervisor going away) is reported there, not thrown as an 'error' event.
    const reply = (metrics: Metrics) =>
      process.send?.({ type: "likes:metrics-reply", id: message.id, metrics } satisfies MetricsReply, undefined, undefined, () => {});
    Promise.all(registries.map((r) => r.getMetricsAsJSON())).then(
      (metrics) => reply(metrics.flat()),
      () => reply([]),
    );
  };
  process.on("message", listener);
  return () => void process.off("message", listener);
}

/** A child process as the supervisor reaches it. */
export interface MetricsChild {
  /** Given a callback, Node reports a closed channel there instead of emitting 'error' on the child. */
  send(message: MetricsRequest, callback: (error: Error | null) => void): unknown;
  on(event: "message", listener: (message: unknown) => void): void;
  off(event: "message", listener: (message: unknown) => void): void;
}

/**
 * The sum of the metrics of the children `children()` names at each scrape. A
 * child that does not answer within `timeoutMs` (busy starting, or stopping) is
 * left out of that scrape rather than holding it.
 */
export function aggregatedMetrics(children: () => readonly MetricsChild[], timeoutMs = 2_000): MetricsSource {
  let nextId = 0;
  const ask = (child: MetricsChild): Promise<Metrics | null> =>
    new Promise((resolve) => {
      const id = ++nextId;
      const finish = (metrics: Metrics | null) => {
        clearTimeout(timer);
        child.off("message", listener);
        resolve(metrics);
      };
      const listener = (message: unknown) => {
        if (isReply(message) && message.id === id) finish(message.metrics);
      };
      const timer = setTimeout(() => finish(null), timeoutMs);
      child.on("message", listener);
      try {
        // A child between 'disconnect' and 'exit' has no channel: without the callback its
        // send error would be an 'error' event the supervisor does not handle.
        child.send({ type: "likes:metrics-request", id }, (error) => {
          if (error) finish(null);
        });
      } catch {
        finish(null);
      }
    });
  return {
    contentType: AggregatorRegistry.PROMETHEUS_CONTENT_TYPE,
    async metrics() {
      const answers = await Promise.all(children().map(ask));
      return AggregatorRegistry.aggregate(answers.filter((a): a is Metrics => a !== null)).metrics();
    },
  };
}
