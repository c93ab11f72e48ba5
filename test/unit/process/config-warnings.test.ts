// Start-up warnings of settings that are likely wrong where they run.
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/config.js";
import { configWarnings } from "../../../src/process/config-warnings.js";

const production = { NODE_ENV: "production", JWT_SECRET: "a-production-secret-long-enough" };
const warningsFor = (env: Record<string, string>) => configWarnings(loadConfig(env));

describe("start-up warnings", () => {
  it("when production leaves CORS_ORIGINS empty, then start-up warns that pages cannot call; an origin or development does not", () => {
    expect(warningsFor(production)).toEqual([expect.stringMatching(/^CORS_ORIGINS is empty/)]);
    expect(warningsFor({ ...production, CORS_ORIGINS: "https://app.example.com" })).toEqual([]);
    expect(warningsFor({ ...production, CORS_ORIGINS: "*" })).toEqual([]);
    expect(warningsFor({})).toEqual([]);
  });

  it("when per-address budgets are on, TRUST_PROXY off and HOST not loopback, then start-up warns; trusting a proxy, a loopback host or budgets off does not", () => {
    const exposed = { ...production, CORS_ORIGINS: "*", HOST: "0.0.0.0" };
    expect(warningsFor(exposed)).toEqual([expect.stringMatching(/^TRUST_PROXY is off while per-address rate budgets are on/)]);
    expect(warningsFor({ ...exposed, TRUST_PROXY: "0" })).toHaveLength(1);
    expect(warningsFor({ ...exposed, TRUST_PROXY: "1" })).toEqual([]);
    expect(warningsFor({ ...exposed, TRUST_PROXY: "10.0.0.0/8" })).toEqual([]);
    expect(warningsFor({ ...exposed, RATE_LIMITS: "off" })).toEqual([]);
    expect(warningsFor({ ...exposed, RATE_LIMIT_IP_MUTATIONS: "0", RATE_LIMIT_IP_SIGN_INS: "0", RATE_LIMIT_IP_QUERY_COST: "0" })).toEqual([]);
    for (const HOST of ["127.0.0.1", "::1", "localhost"]) expect(warningsFor({ ...exposed, HOST })).toEqual([]);
  });
});
