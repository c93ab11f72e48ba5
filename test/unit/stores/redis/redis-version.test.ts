// The oldest Redis the service starts on, read from INFO server's redis_version.
import { describe, expect, it } from "vitest";
import { meetsRedisVersion } from "../../../../src/stores/redis/durability.js";

describe("Redis version", () => {
  it.each([
    ["7.0.15", true],
    ["7.2.4", true],
    ["8.0.0", true],
    ["6.2.14", false],
    ["5.0.7", false],
    ["unknown", false],
    ["", false],
  ])("when Redis says %s, then it is new enough: %s", (version, ok) => {
    expect(meetsRedisVersion(version)).toBe(ok);
  });
});
