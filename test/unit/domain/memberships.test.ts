// The membership use case's rules and error mapping, with stand-in stores: this tests no Redis behaviour.
import { describe, expect, it } from "vitest";
import type { CounterService } from "../../../src/domain/counters.js";
import { createMembershipService } from "../../../src/domain/memberships.js";
import type { MembershipStore, MemberPageStore } from "../../../src/domain/ports/index.js";
import { TargetFullError } from "../../../src/errors.js";

const unused = <T>() => ({}) as T;

describe("membership errors", () => {
  it("when a target holds the most members it can, then joining it is FORBIDDEN, not an internal error", async () => {
    const full = async () => {
      throw new TargetFullError({ type: "post", id: 1n });
    };
    const memberships = createMembershipService({
      memberships: { add: full, remove: full } as unknown as MembershipStore,
      memberPages: unused<MemberPageStore>(),
      counters: unused<CounterService>(),
    });
    await expect(memberships.join("like", { type: "post", id: 1n }, 2n)).rejects.toMatchObject({
      code: "FORBIDDEN",
      message: expect.stringMatching(/no more likes/),
    });
    await expect(memberships.join("collect", { type: "post", id: 1n }, 2n)).rejects.toMatchObject({
      code: "FORBIDDEN",
      message: expect.stringMatching(/no more collects/),
    });
  });

  it("when a user follows or unfollows themself, then it is BAD_USER_INPUT naming userId, and no store is asked", async () => {
    const memberships = createMembershipService({
      memberships: unused<MembershipStore>(),
      memberPages: unused<MemberPageStore>(),
      counters: unused<CounterService>(),
    });
    const self = { type: "user", id: 7n } as const;
    await expect(memberships.join("follow", self, 7n)).rejects.toMatchObject({ code: "BAD_USER_INPUT", field: "userId" });
    await expect(memberships.leave("follow", self, 7n)).rejects.toMatchObject({ code: "BAD_USER_INPUT", field: "userId" });
  });
});
