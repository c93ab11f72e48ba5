import { describe, expect, it } from "vitest";
import type { Catalog } from "../../../src/domain/catalog.js";
import type { CounterService } from "../../../src/domain/counters.js";
import { hashPassword, verifyPassword } from "../../../src/domain/identity.js";
import { createTokenService } from "../../../src/graphql/tokens.js";
import { KnownUsers } from "../../../src/domain/known-users.js";
import type { User } from "../../../src/domain/model/index.js";
import type { UserStore } from "../../../src/domain/ports/index.js";
import { createUserService, validateRegistration } from "../../../src/domain/users.js";

describe("registration rules and identity", () => {
  it.each([
    ["ab", "a@b.io", "secret123", "username"],
    ["bad name", "a@b.io", "secret123", "username"],
    ["good_name", "a@b", "secret123", "email"],
    ["good_name", "a@b.io", "secret", "password"],
    ["good_name", "a@b.io", "12345678", "password"],
  ])("when registering %j %j %j, then %s is refused", (username, email, password, field) => {
    expect(() => validateRegistration(username, email, password)).toThrow(expect.objectContaining({ field, code: "BAD_USER_INPUT" }));
  });

  it("when a password is hashed, then only that password verifies and the salt differs each time", async () => {
    const a = await hashPassword("secret123");
    const b = await hashPassword("secret123");
    expect(a).not.toBe(b);
    expect(await verifyPassword("secret123", a)).toBe(true);
    expect(await verifyPassword("secret124", a)).toBe(false);
  });
});

const userOf = (id: bigint): User => ({ id, username: `u${id}`, email: `u${id}@example.com`, createdAt: new Date(0) });

/** A user service over users 1..3 in a catalog that counts its lookups, and announcements it records. */
function accounts(options: { announce?: (userId: bigint) => Promise<void> } = {}) {
  const rows = new Map([1n, 2n, 3n].map((id) => [id, userOf(id)]));
  const lookups: bigint[] = [];
  const announced: bigint[] = [];
  const catalog: Catalog = {
    users: async (ids) => {
      lookups.push(...ids);
      return ids.map((id) => rows.get(id) ?? null);
    },
    posts: async (ids) => ids.map(() => null),
    comments: async (ids) => ids.map(() => null),
  };
  const store: UserStore = {
    async create(input) {
      const created = { ...userOf(BigInt(rows.size + 1)), username: input.username };
      rows.set(created.id, created);
      return { created };
    },
    findCredentials: async () => null,
    findByIds: async () => [],
    idRunsAfter: async () => [],
  };
  const tokens = createTokenService({ secret: "unit-test-secret-of-sufficient-length", ttlSeconds: 60 });
  const known = new KnownUsers();
  const announceFailures: unknown[] = [];
  const users = createUserService({
    users: store,
    tokens,
    counters: { initNew: async () => {} } as unknown as CounterService,
    catalog,
    known,
    announcements: { announce: options.announce ?? (async (userId) => void announced.push(userId)) },
    onAnnounceFailure: (err) => announceFailures.push(err),
  });
  return { users, tokens, known, lookups, announced, announceFailures };
}

describe("authenticating a bearer token", () => {
  it("when the token's user is known, then it is accepted without a lookup", async () => {
    const { users, tokens, known, lookups } = accounts();
    known.addRuns([{ first: 1n, last: 3n }]);
    expect(await users.authenticate(await tokens.issue(2n))).toEqual({ viewer: expect.objectContaining({ userId: 2n }) });
    expect(lookups).toEqual([]);
  });

  it("when the token's user is not known yet (loading, or an announcement lost), then one lookup accepts them and they are known from then on", async () => {
    const { users, tokens, known, lookups } = accounts();
    const token = await tokens.issue(3n);
    expect(await users.authenticate(token)).toHaveProperty("viewer");
    expect(lookups).toEqual([3n]);
    expect(known.has(3n)).toBe(true);
    expect(await users.authenticate(token)).toHaveProperty("viewer");
    expect(lookups).toEqual([3n]);
  });

  it("when the token names nobody, then it is refused, and refused again without a lookup", async () => {
    const { users, tokens, known, lookups } = accounts();
    const token = await tokens.issue(99n);
    expect(await users.authenticate(token)).toEqual({ problem: expect.stringContaining("names no user") });
    expect(await users.authenticate(token)).toEqual({ problem: expect.stringContaining("names no user") });
    expect(lookups).toEqual([99n]);
    expect(known.has(99n)).toBe(false);
  });
});

describe("registering", () => {
  it("when a user registers, then this process knows them at once and they are announced to the others", async () => {
    const { users, known, announced, lookups } = accounts();
    const session = await users.register("new_user", "new@example.com", "secret123");
    expect(known.has(session.user.id)).toBe(true);
    expect(announced).toEqual([session.user.id]);
    expect(await users.authenticate(session.token)).toHaveProperty("viewer");
    expect(lookups).toEqual([]);
  });

  it("when the announcement fails, then registration still succeeds and the failure is reported", async () => {
    const { users, announceFailures } = accounts({
      announce: async () => {
        throw new Error("Redis is down");
      },
    });
    const session = await users.register("new_user", "new@example.com", "secret123");
    expect(session.user.username).toBe("new_user");
    expect(announceFailures).toHaveLength(1);
  });
});
