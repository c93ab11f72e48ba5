// Password hashing: scrypt work is bounded, and a storm of sign-ins is refused rather than queued.
import { describe, expect, it } from "vitest";
import { hashPassword, maxWaitingPasswordWork } from "../../../src/domain/identity.js";

describe("password work", () => {
  it("when more sign-ins arrive than may wait for scrypt, then the excess is refused at once as RATE_LIMITED instead of queueing", async () => {
    const outcomes = await Promise.allSettled(Array.from({ length: maxWaitingPasswordWork + 12 }, () => hashPassword("secret123")));
    const refused = outcomes.flatMap((o) => (o.status === "rejected" ? [o.reason as { code?: string; retryAfterSeconds?: number }] : []));
    const hashed = outcomes.length - refused.length;
    expect(hashed).toBeGreaterThanOrEqual(maxWaitingPasswordWork);
    expect(hashed).toBeLessThanOrEqual(maxWaitingPasswordWork + 2);
    expect(refused.every((e) => e.code === "RATE_LIMITED" && e.retryAfterSeconds === 1)).toBe(true);
  });
});
