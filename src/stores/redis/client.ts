import { Cluster, Redis } from "ioredis";
import { defineScripts } from "./scripts.js";

export type RedisClient = Redis | Cluster;

export interface RedisConnectionOptions {
  readonly url: string;
  /** host:port seeds; when non-empty the client speaks Redis Cluster. */
  readonly clusterNodes?: readonly string[];
}

/**
 * A client with the service's scripts defined and auto-pipelining on: every
 * command issued in one tick leaves in one write, which is what turns a
 * DataLoader batch into one round trip (per cluster node).
 */
export function createRedisClient(options: RedisConnectionOptions): RedisClient {
  const common = { enableAutoPipelining: true, lazyConnect: true };
  const client =
    options.clusterNodes && options.clusterNodes.length > 0
      ? new Cluster(
          options.clusterNodes.map((node) => {
            const [host = "127.0.0.1", port = "6379"] = node.split(":");
            return { host, port: Number(port) };
          }),
          { ...common, redisOptions: {} },
        )
      : new Redis(options.url, { ...common, maxRetriesPerRequest: 3 });
  defineScripts(client);
  return client;
}
