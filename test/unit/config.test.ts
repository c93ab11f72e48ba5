// The settings as the service reads them from its environment: defaults, where each
// variable lands in Config, and what is refused. Pure: no service is needed.
import { availableParallelism } from "node:os";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";

const production = { NODE_ENV: "production", JWT_SECRET: "a-production-secret-long-enough" };

describe("loadConfig", () => {
  it("when the environment is empty, then the development defaults load", () => {
    const config = loadConfig({});
    expect({
      production: config.production,
      port: config.port,
      databaseUrl: config.databaseUrl,
      batchSize: config.persist.batchSize,
      rateLimitsEnabled: config.rateLimits.enabled,
      cron: config.reconcile.cron,
      corsOrigins: config.corsOrigins,
      trustProxy: config.trustProxy,
      tracing: config.tracing,
      webConcurrency: config.webConcurrency,
    }).toEqual({
      production: false,
      port: 4000,
      databaseUrl: "postgresql://postgres@127.0.0.1:5432/likes",
      batchSize: 1000,
      rateLimitsEnabled: true,
      cron: "0 3 * * *",
      corsOrigins: "*",
      trustProxy: false,
      tracing: null,
      webConcurrency: availableParallelism(),
    });
  });

  it("when PERSIST_BATCH_SIZE is set, then config.persist.batchSize holds it as a number and nothing else changes", () => {
    const config = loadConfig({ PERSIST_BATCH_SIZE: "250" });
    expect(config.persist).toEqual({ ...loadConfig({}).persist, batchSize: 250 });
  });

  it("when settings are written as operators write them, then they become what the service uses", () => {
    const config = loadConfig({
      RECONCILE_CRON: "off",
      TRUST_PROXY: "10.0.0.0/8, 192.168.1.1",
      CORS_ORIGINS: "https://App.Example.com:443, http://localhost:3000",
      REDIS_CLUSTER_NODES: "redis-0:6379, redis-1:6379,",
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318",
      JWT_ISSUER: "",
    });
    expect({
      cron: config.reconcile.cron,
      trustProxy: config.trustProxy,
      corsOrigins: config.corsOrigins,
      redisClusterNodes: config.redisClusterNodes,
      tracing: config.tracing,
      issuer: config.jwt.issuer,
    }).toEqual({
      cron: null,
      trustProxy: ["10.0.0.0/8", "192.168.1.1"],
      corsOrigins: ["https://app.example.com", "http://localhost:3000"],
      redisClusterNodes: ["redis-0:6379", "redis-1:6379"],
      tracing: { endpoint: "http://127.0.0.1:4318", serviceName: "like-counter-service" },
      issuer: undefined,
    });
    expect(loadConfig({ TRUST_PROXY: "2" }).trustProxy).toBe(2);
  });

  it("when a value is bad, then the configuration is refused with a sentence naming its variable and what was expected", () => {
    expect(() => loadConfig({ PERSIST_BATCH_SIZE: "many" })).toThrow(
      "Invalid configuration in the environment:\n  PERSIST_BATCH_SIZE: Invalid input: expected number, received NaN",
    );
    const twoBad = () => loadConfig({ RELAY_LINGER_MS: "5000", RABBITMQ_PREFIX: "Likes" });
    expect(twoBad).toThrow("\n  RELAY_LINGER_MS: Too big: expected number to be <=1000");
    expect(twoBad).toThrow("\n  RABBITMQ_PREFIX: RABBITMQ_PREFIX must be lower-case letters, digits, _ or -");
    expect(() => loadConfig({ CORS_ORIGINS: "https://app.example.com/path" })).toThrow(/CORS_ORIGINS: "https:\/\/app.example.com\/path" is not an origin/);
  });

  it("when Redis Sentinels are set, then they and their name are read, and refused beside cluster nodes", () => {
    const config = loadConfig({ REDIS_SENTINELS: "s-0:26379, s-1", REDIS_SENTINEL_NAME: "likes" });
    expect({ sentinels: config.redisSentinels, name: config.redisSentinelName }).toEqual({ sentinels: ["s-0:26379", "s-1"], name: "likes" });
    expect(loadConfig({}).redisSentinelName).toBe("mymaster");
    expect(() => loadConfig({ REDIS_SENTINELS: "s-0", REDIS_CLUSTER_NODES: "r-0:6379" })).toThrow(
      "REDIS_SENTINELS: REDIS_SENTINELS and REDIS_CLUSTER_NODES are both set",
    );
  });

  it("when NODE_ENV is production without JWT_SECRET, then the configuration is refused; with one, it loads with no origin allowed by default", () => {
    expect(() => loadConfig({ NODE_ENV: "production" })).toThrow("JWT_SECRET: JWT_SECRET must be set in production; the development default is public.");
    const config = loadConfig(production);
    expect({ production: config.production, jwtSecret: config.jwtSecret, corsOrigins: config.corsOrigins }).toEqual({
      production: true,
      jwtSecret: production.JWT_SECRET,
      corsOrigins: [],
    });
  });

  it("when the configuration is loaded, then it and every object in it are frozen", () => {
    const config = loadConfig({ CORS_ORIGINS: "https://app.example.com", OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318" });
    const objects = { config, persist: config.persist, live: config.live, views: config.views, corsOrigins: config.corsOrigins, tracing: config.tracing };
    expect(
      Object.entries(objects)
        .filter(([, value]) => !Object.isFrozen(value))
        .map(([name]) => name),
    ).toEqual([]);
    expect(() => {
      (config.persist as { batchSize: number }).batchSize = 1;
    }).toThrow(TypeError);
  });
});
