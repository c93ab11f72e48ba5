// live-hot: subscribers of one hot post over graphql-ws while it takes likes at
// a steady rate. Measures the lag from each like's acknowledgement to the first
// message each subscriber got that includes it, the messages each subscriber
// got a second, and the CPU of the API processes.
import http from "node:http";
import { createClient, type Client } from "graphql-ws";
import WebSocket from "ws";
import type { RunningService } from "./harness.js";
import type { ScenarioContext } from "./scenario-context.js";

export interface LiveFigures {
  readonly mode: string;
  readonly subscribers: number;
  readonly likesPerSecond: number;
  readonly likes: number;
  readonly failures: number;
  /** The likes' own latency while subscribers are served. */
  readonly likeP50Ms: number;
  readonly likeP99Ms: number;
  readonly lagP50Ms: number;
  readonly lagP99Ms: number;
  readonly lagMaxMs: number;
  readonly messagesPerSubscriberSecond: number;
  /** The shortest time between two messages to one subscriber. */
  readonly minGapMs: number;
  /** Likes no subscriber message ever included (each subscriber's last message should hold them all). */
  readonly missedBySubscribers: number;
  /** CPU of the API processes during the run, in cores (1 = one core busy). */
  readonly apiCores: number;
  readonly loadCores: number;
}

const likeQuery = "mutation($id: ID!) { likePost(postId: $id) { changed post { counts { likes } } } }";
const subscription = "subscription($ids: [ID!]!) { postCounts(postIds: $ids) { id counts { likes reads comments collects } } }";

interface Message {
  readonly at: number;
  readonly likes: number;
}

/** Keep-alive connections for the likes: enough that slow answers never hold the offered rate back. */
const agent = new http.Agent({ keepAlive: true, maxSockets: 512 });

function postJson(url: string, body: string, token: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const request = http.request(
      url,
      { method: "POST", agent, headers: { "content-type": "application/json", authorization: `Bearer ${token}` } },
      (response) => {
        let text = "";
        response.setEncoding("utf8");
        response.on("data", (chunk: string) => (text += chunk));
        response.on("end", () => resolve({ status: response.statusCode ?? 0, body: text }));
        response.on("error", reject);
      },
    );
    request.on("error", reject);
    request.end(body);
  });
}

/**
 * Sends `total` requests at `perSecond`, evenly, whatever the answers' speed (an open
 * loop): autocannon's rates hand each connection a quota per second, which it spends in a
 * burst at the start of each second, and a slow answer holds the connection's rest back.
 */
async function paced(total: number, perSecond: number, send: () => Promise<void>): Promise<void> {
  const startedAt = performance.now();
  const inFlight = new Set<Promise<void>>();
  let sent = 0;
  while (sent < total) {
    const due = Math.min(total, Math.floor(((performance.now() - startedAt) * perSecond) / 1000));
    for (; sent < due; sent++) {
      const request = send().finally(() => inFlight.delete(request));
      inFlight.add(request);
    }
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  await Promise.all(inFlight);
}

const percentile = (values: readonly number[], q: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(q * values.length))] ?? 0;

/** Milliseconds at quantile `q` of `samples` counted per whole millisecond. */
function quantile(histogram: Uint32Array, total: number, q: number): number {
  let seen = 0;
  for (let ms = 0; ms < histogram.length; ms++) {
    seen += histogram[ms] as number;
    if (seen >= q * total) return ms;
  }
  return histogram.length;
}

async function subscribe(service: RunningService, postId: bigint, count: number): Promise<{ clients: Client[]; messages: Message[][] }> {
  const url = service.url.replace(/^http/, "ws");
  const clients: Client[] = [];
  const messages: Message[][] = [];
  const connected: Promise<void>[] = [];
  for (let i = 0; i < count; i++) {
    const received: Message[] = [];
    messages.push(received);
    let onConnected: () => void = () => {};
    let onClosed: (event: unknown) => void = () => {};
    connected.push(
      new Promise((resolve, reject) => {
        onConnected = resolve;
        onClosed = (event) => reject(new Error(`subscriber ${i} could not connect: ${(event as { code?: number }).code ?? String(event)}`));
      }),
    );
    const client = createClient({
      url,
      webSocketImpl: WebSocket,
      lazy: false,
      retryAttempts: 0,
      on: { connected: () => onConnected(), closed: (event) => onClosed(event) },
      onNonLazyError: () => {},
    });
    client.subscribe<{ postCounts: { counts: { likes: number } } }>(
      { query: subscription, variables: { ids: [String(postId)] } },
      {
        next: (result) => {
          if (result.data) received.push({ at: performance.now(), likes: result.data.postCounts.counts.likes });
        },
        error: () => {},
        complete: () => {},
      },
    );
    clients.push(client);
    // Connections open a few at a time, as clients arrive, not as one burst of upgrades.
    if (i % 50 === 49) await Promise.all(connected.slice(-50));
  }
  await Promise.all(connected);
  return { clients, messages };
}

/**
 * One like first: once every subscriber got its message, every subscription is in place.
 * Then the messages are dropped, so the run starts afresh.
 */
async function awaitSubscriptions(ctx: ScenarioContext, post: bigint, messages: readonly Message[][]): Promise<void> {
  const probe = ctx.fresh.hotLiker();
  await fetch(ctx.service.url, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${ctx.token(probe)}` },
    body: JSON.stringify({ query: likeQuery, variables: { id: String(post) } }),
  });
  const deadline = Date.now() + 30_000;
  while (messages.some((m) => m.length === 0) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
  const ready = messages.filter((m) => m.length > 0).length;
  if (ready < messages.length) throw new Error(`only ${ready} of ${messages.length} subscribers got the first message within 30 s`);
  // Settle past the probe's message interval, then start afresh.
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  for (const m of messages) m.length = 0;
}

/** Each subscriber's lag to every acknowledged like its messages held, in a histogram by whole millisecond. */
function lagsOf(messages: readonly Message[][], ackedAt: ReadonlyMap<number, number>) {
  const histogram = new Uint32Array(60_000);
  let samples = 0;
  let maxLag = 0;
  let missed = 0;
  let minGap = Infinity;
  const counts = [...ackedAt.keys()];
  const first = Math.min(...counts);
  const last = Math.max(...counts);
  for (const received of messages) {
    let upTo = first - 1;
    received.forEach((message, i) => {
      if (i > 0) minGap = Math.min(minGap, message.at - (received[i - 1] as Message).at);
      for (let count = upTo + 1; count <= Math.min(message.likes, last); count++) {
        const acked = ackedAt.get(count);
        if (acked === undefined) continue;
        // A message can leave before the like's answer: Redis announces the change in the like's own script.
        const lag = Math.max(0, Math.round(message.at - acked));
        const bucket = Math.min(lag, histogram.length - 1);
        histogram[bucket] = (histogram[bucket] as number) + 1;
        samples++;
        maxLag = Math.max(maxLag, lag);
      }
      upTo = Math.max(upTo, message.likes);
    });
    if (upTo < last) missed += last - upTo;
  }
  return { histogram, samples, maxLag, missed, minGap };
}

export async function liveHot(ctx: ScenarioContext, options: { subscribers: number; likesPerSecond: number; seconds: number }): Promise<LiveFigures> {
  const post = ctx.data.postIds[0] as bigint;
  const { clients, messages } = await subscribe(ctx.service, post, options.subscribers);
  try {
    await awaitSubscriptions(ctx, post, messages);

    const likes = Math.min(options.likesPerSecond * options.seconds, ctx.fresh.hotLeft);
    /** When the like that took the count to each value was acknowledged. */
    const ackedAt = new Map<number, number>();
    let failures = 0;
    const cpuBefore = ctx.service.cpu();
    const ownBefore = process.cpuUsage();
    const startedAt = performance.now();
    const latencies: number[] = [];
    await paced(likes, options.likesPerSecond, async () => {
      const user = ctx.fresh.hotLiker();
      const sentAt = performance.now();
      const answer = await postJson(ctx.service.url, JSON.stringify({ query: likeQuery, variables: { id: String(post) } }), ctx.token(user)).catch(() => null);
      latencies.push(performance.now() - sentAt);
      const count = answer?.status === 200 ? /"likes":(\d+)/.exec(answer.body)?.[1] : undefined;
      if (count === undefined || answer?.body.includes('"errors"')) failures++;
      else ackedAt.set(Number(count), performance.now());
    });
    const endedAt = performance.now();
    const apiSeconds = ctx.service.cpu().api - cpuBefore.api;
    const own = process.cpuUsage(ownBefore);
    // The last changes' messages arrive up to an interval later.
    await new Promise((resolve) => setTimeout(resolve, 2_500));

    const { histogram, samples, maxLag, missed, minGap } = lagsOf(messages, ackedAt);
    const runSeconds = (endedAt - startedAt) / 1000;
    const inRun = messages.reduce((sum, received) => sum + received.filter((m) => m.at <= endedAt).length, 0);
    return {
      mode: ctx.mode,
      subscribers: options.subscribers,
      likesPerSecond: Math.round(ackedAt.size / runSeconds),
      likes: ackedAt.size,
      failures,
      likeP50Ms: Math.round(percentile(latencies, 0.5)),
      likeP99Ms: Math.round(percentile(latencies, 0.99)),
      lagP50Ms: quantile(histogram, samples, 0.5),
      lagP99Ms: quantile(histogram, samples, 0.99),
      lagMaxMs: maxLag,
      messagesPerSubscriberSecond: Number((inRun / options.subscribers / runSeconds).toFixed(2)),
      minGapMs: Math.round(minGap),
      missedBySubscribers: missed,
      apiCores: Number((apiSeconds / runSeconds).toFixed(2)),
      loadCores: Number(((own.user + own.system) / 1e6 / runSeconds).toFixed(2)),
    };
  } finally {
    await Promise.all(clients.map((client) => Promise.resolve(client.dispose())));
  }
}
