// 300 requests with hostile and odd values in every argument of every field and
// mutation of the schema (seeded, so a failure repeats): none may answer
// INTERNAL_SERVER_ERROR or an error without a code, or fail at the HTTP level.
import { readFileSync } from "node:fs";
import { buildSubgraphSchema } from "@apollo/subgraph";
import {
  getNamedType,
  isEnumType,
  isLeafType,
  isListType,
  isNonNullType,
  isObjectType,
  type GraphQLArgument,
  type GraphQLField,
  type GraphQLInputType,
  type GraphQLObjectType,
  parse,
} from "graphql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCustomApi, type CustomApi } from "../../support/custom-api.js";
import { createUsers, dataOf, openDatabase, type GraphQLResponse, type TestUser } from "../../support/env.js";

const cases = 300;
const seed = 20_261_110;

/** mulberry32: a small seeded generator, so every run sends the same requests. */
function generator(state: number) {
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

const cursorOf = (text: string) => Buffer.from(text).toString("base64url");
const hostileStrings = [
  "",
  " ",
  "ok",
  "a\u0000b",
  "\u0000",
  "\u001b[31mred",
  "line\nbreak",
  "\t",
  "\u007f",
  "\u0085",
  "half \ud800",
  "\udc00",
  "😀👍",
  "x".repeat(20_001),
  "' OR 1=1 --",
  "%00",
  "<script>",
  "c:1",
  cursorOf("c:9223372036854775808"),
  cursorOf("c:0"),
  cursorOf("l:1:1"),
  cursorOf("l:9999999999999999:99999999999999999999"),
  cursorOf("l:253402300800000:1"),
  cursorOf("l:999999999999999:1"),
  "bm9wZQ",
  "====",
];
const hostileIds = [
  "1",
  "0",
  "-1",
  "01",
  "9223372036854775807",
  "9223372036854775808",
  "99999999999999999999",
  "1\u0000",
  "1e3",
  "١٢٣",
  "abc",
  "",
  " 1",
  "\ud800",
  "9".repeat(400),
];
const hostileInts = [0, 1, -1, 20, 100, 101, 2_147_483_647, 2_147_483_648, -2_147_483_649, 1.5, 1e308, "1", "x", true];

describe("fuzzing every argument", () => {
  let api: CustomApi;
  let user: TestUser;
  const known: Record<string, string> = {};

  beforeAll(async () => {
    api = await startCustomApi();
    const db = openDatabase(api.config);
    [user] = (await createUsers(db, api.config, 1)) as [TestUser];
    await db.$disconnect();
    known.post = dataOf(
      await api.gql<{ createPost: { id: string } }>(`mutation { createPost(title: "fuzz", body: "b") { id } }`, {}, user.token),
    ).createPost.id;
    known.comment = dataOf(
      await api.gql<{ createComment: { id: string } }>(`mutation($p: ID!) { createComment(postId: $p, body: "c") { id } }`, { p: known.post }, user.token),
    ).createComment.id;
    known.user = user.id.toString();
  });
  afterAll(async () => {
    await api.close();
  });

  it(`when ${cases} seeded requests carry hostile values in every argument, then none is an internal error and every error has a code`, async () => {
    const random = generator(seed);
    const pick = <T>(values: readonly T[]): T => values[Math.floor(random() * values.length)] as T;
    const schema = buildSubgraphSchema(parse(readFileSync("schema.graphql", "utf8")));

    function valueFor(type: GraphQLInputType): unknown {
      if (random() < 0.06) return null;
      if (isNonNullType(type)) return valueFor(type.ofType);
      if (isListType(type)) {
        if (random() < 0.15) return valueFor(type.ofType);
        const length = pick([0, 1, 3, 100, 101, 1_200]);
        return Array.from({ length }, () => (length > 3 ? String(1 + Math.floor(random() * 1000)) : valueFor(type.ofType)));
      }
      const named = getNamedType(type);
      if (isEnumType(named)) return pick([...named.getValues().map((v) => v.name), "NOPE", 1]);
      if (named.name === "ID") return pick([...hostileIds, known.post, known.comment, known.user, 7]);
      if (named.name === "Int") return pick(hostileInts);
      // Federation's entity representations: odd objects as well as odd scalars.
      if (named.name === "_Any") {
        return pick([
          { __typename: pick(["Post", "Comment", "User", "PostCounts", "Nope", 7]), id: pick([...hostileIds, known.post, 7, null]) },
          { id: known.post },
          ...hostileStrings,
        ]);
      }
      if (named.name === "String") return pick(hostileStrings);
      return pick(hostileStrings);
    }

    // Where each field with arguments is reached: root fields directly, fields of
    // objects through the root field that fetches such an object by a known id.
    const entry = new Map<string, (inner: string) => string>();
    for (const [name, field] of Object.entries(schema.getQueryType()?.getFields() ?? {})) {
      const type = getNamedType(field.type);
      const idArgument = field.args.length === 1 && field.args[0]?.name === "id";
      if (isObjectType(type) && idArgument && known[name]) entry.set(type.name, (inner) => `${name}(id: "${known[name]}") { ${inner} }`);
    }
    const targets: { operation: "query" | "mutation"; field: GraphQLField<unknown, unknown>; wrap: (inner: string) => string }[] = [];
    for (const [operation, root] of [
      ["query", schema.getQueryType()],
      ["mutation", schema.getMutationType()],
    ] as const) {
      for (const field of Object.values(root?.getFields() ?? {})) if (field.args.length) targets.push({ operation, field, wrap: (inner) => inner });
    }
    for (const type of Object.values(schema.getTypeMap()).filter((t): t is GraphQLObjectType => isObjectType(t) && !t.name.startsWith("__"))) {
      const wrap = entry.get(type.name);
      if (!wrap || type === schema.getQueryType() || type === schema.getMutationType()) continue;
      for (const field of Object.values(type.getFields())) if (field.args.length) targets.push({ operation: "query", field, wrap });
    }
    expect(targets.length).toBeGreaterThan(10);

    const failures: string[] = [];
    const codes = new Map<string, number>();
    for (let i = 0; i < cases; i++) {
      const target = targets[i % targets.length] as (typeof targets)[number];
      const args = target.field.args.filter((a: GraphQLArgument) => isNonNullType(a.type) || random() < 0.8);
      const variables: Record<string, unknown> = {};
      const inline = random() < 0.25;
      const written = args.map((a, n) => {
        const value = valueFor(a.type);
        if (inline && (typeof value === "string" || typeof value === "number" || typeof value === "boolean")) return `${a.name}: ${JSON.stringify(value)}`;
        variables[`v${n}`] = value;
        return `${a.name}: $v${n}`;
      });
      const definitions = args.flatMap((a, n) => (`v${n}` in variables ? [`$v${n}: ${String(a.type)}`] : []));
      const selection = isLeafType(getNamedType(target.field.type)) ? "" : " { __typename }";
      const call = `${target.field.name}${written.length ? `(${written.join(", ")})` : ""}${selection}`;
      const query = `${target.operation}${definitions.length ? `(${definitions.join(", ")})` : ""} { ${target.wrap(call)} }`;
      const token = random() < 0.7 ? user.token : undefined;
      const response = await fetch(api.endpoint, {
        method: "POST",
        headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
        body: JSON.stringify({ query, variables }),
      });
      const text = await response.text();
      let body: GraphQLResponse<unknown>;
      try {
        body = JSON.parse(text) as GraphQLResponse<unknown>;
      } catch {
        failures.push(`#${i} ${response.status} not JSON: ${text.slice(0, 200)}`);
        continue;
      }
      if (response.status >= 500) failures.push(`#${i} HTTP ${response.status}: ${query.slice(0, 300)} ${JSON.stringify(variables).slice(0, 300)}`);
      for (const error of body.errors ?? []) {
        const code = error.extensions?.code;
        codes.set(String(code), (codes.get(String(code)) ?? 0) + 1);
        if (typeof code !== "string" || code === "INTERNAL_SERVER_ERROR") {
          failures.push(`#${i} ${String(code)} "${error.message}": ${query.slice(0, 300)} ${JSON.stringify(variables).slice(0, 300)}`);
        }
      }
    }
    expect(failures).toEqual([]);
    // The fuzz reached the resolvers' own checks, not only GraphQL's coercion.
    expect(codes.get("BAD_USER_INPUT")).toBeGreaterThan(30);
  });
});
