// The request limits remember what they learnt of a document for the next request
// sending the same DocumentNode (as Apollo's document cache does). Every answer
// must be the one a check that has never seen the document gives: the same cost,
// or the same refusal with the same message and extensions.
import { getOperationAST, GraphQLError, parse, type DocumentNode } from "graphql";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/config.js";
import { createRequestLimitsCheck, type LimitedRequest } from "../../../src/graphql/limits/request-limits-plugin.js";
import { createSchema } from "../../../src/graphql/schema.js";

const limits = loadConfig({}).limits;
const schema = createSchema();
const ids = (count: number) => Array.from({ length: count }, (_, i) => String(i + 1));

type Outcome = { cost: number | null } | { refused: string; extensions: unknown };

function outcome(check: (request: LimitedRequest) => number | null, request: LimitedRequest): Outcome {
  try {
    return { cost: check(request) };
  } catch (error) {
    if (!(error instanceof GraphQLError)) throw error;
    return { refused: error.message, extensions: error.extensions };
  }
}

function requestOf(document: DocumentNode, variables: Record<string, unknown>, operationName?: string): LimitedRequest {
  return { document, operation: getOperationAST(document, operationName) ?? undefined, operationName, variables };
}

/** Sends each set of variables with one DocumentNode to one check, and each to a check of its own; answers both. */
function sendInTurn(query: string, variableSets: Record<string, unknown>[], operationName?: string) {
  const document = parse(query);
  const remembering = createRequestLimitsCheck(schema, limits);
  return variableSets.map((variables) => ({
    remembered: outcome(remembering, requestOf(document, variables, operationName)),
    fresh: outcome(createRequestLimitsCheck(schema, limits), requestOf(parse(query), variables, operationName)),
  }));
}

const postsQuery = `query($ids: [ID!]!) { posts(ids: $ids) { id counts { likes reads comments } viewerHasLiked } }`;

describe("request limits remembered per document", () => {
  it("when the same document arrives with 1 id, then 100 ids, then 1 id again, then each cost is the fresh one and they differ", () => {
    const answers = sendInTurn(postsQuery, [{ ids: ids(1) }, { ids: ids(100) }, { ids: ids(1) }]);
    for (const { remembered, fresh } of answers) expect(remembered).toEqual(fresh);
    expect(answers.map((a) => a.remembered)).toEqual([{ cost: 2 }, { cost: 200 }, { cost: 2 }]);
  });

  it("when a NUL arrives in a variable on the second request of a document, then it is refused as a fresh check refuses it", () => {
    const answers = sendInTurn(postsQuery, [{ ids: ids(3) }, { ids: ["1", "2\u0000"] }, { ids: ids(3) }]);
    for (const { remembered, fresh } of answers) expect(remembered).toEqual(fresh);
    expect(answers[1]?.remembered).toEqual({
      refused: "ids must not contain a NUL byte (\\u0000).",
      extensions: { code: "BAD_USER_INPUT", field: "ids", http: { status: 400 } },
    });
  });

  it("when NUL bytes sit in several arguments, inline or in variables, then the first argument in the document is named", () => {
    const query = `mutation($a: String!, $b: String!) { createPost(title: $a, body: "x\\u0000") { id } createComment(postId: "1", body: $b) { id } }`;
    const answers = sendInTurn(query, [
      { a: "fine", b: "fine" },
      { a: "bad\u0000", b: "fine" },
      { a: "fine", b: "bad\u0000" },
    ]);
    for (const { remembered, fresh } of answers) expect(remembered).toEqual(fresh);
    expect(answers.map((a) => ("refused" in a.remembered ? (a.remembered.extensions as { field: string }).field : null))).toEqual(["body", "title", "body"]);
  });

  it("when first, @skip and @include come in variables, then every combination is priced as fresh", () => {
    const query = `query($n: Int, $m: Int!, $deep: Boolean!, $flat: Boolean = false) {
      feed(first: $n) { edges { node { id comments(first: $m) @include(if: $deep) { edges { node { id } } } author @skip(if: $flat) { id } } } }
    }`;
    const sets = [
      { m: 1, deep: false },
      { n: 5, m: 1, deep: false },
      { n: 5, m: 1, deep: true },
      { n: 5, m: 1, deep: true, flat: true },
      { n: null, m: 10, deep: true },
      { n: 100, m: 100, deep: true },
      { n: 5, m: 1, deep: false },
    ];
    const answers = sendInTurn(query, sets);
    for (const { remembered, fresh } of answers) expect(remembered).toEqual(fresh);
    expect(new Set(answers.map((a) => JSON.stringify(a.remembered))).size).toBe(6);
    expect(answers[5]?.remembered).toMatchObject({ extensions: { code: "QUERY_TOO_COSTLY", limit: limits.cost } });
  });

  it("when variables fail coercion after the same shape was priced, then the error is the fresh one", () => {
    const answers = sendInTurn(`query($n: Int, $ids: [ID!]!) { feed(first: $n) { edges { cursor } } posts(ids: $ids) { id } }`, [
      { n: 5, ids: ["1", 2] },
      { n: "5", ids: ["1", "2"] },
      { n: 5.5, ids: ["1", "2"] },
      { n: 2 ** 31, ids: ["1", "2"] },
      { n: 5, ids: ["1", null] },
      { n: 5, ids: ["1", 2.5] },
      { n: 5, ids: [true, "2"] },
      { n: 5, ids: null },
      { n: 5 },
      { n: 5, ids: "1" },
      { n: 5, ids: [] },
      { n: 5, ids: ["1", "2"] },
    ]);
    for (const { remembered, fresh } of answers) expect(remembered).toEqual(fresh);
    expect(answers.filter((a) => "refused" in a.remembered)).toHaveLength(8);
  });

  it("when a request names one of several operations, then each is priced and measured as fresh", () => {
    const query = `query A($n: Int) { feed(first: $n) { edges { cursor } } } query B($ids: [ID!]!) { posts(ids: $ids) { id author { id } } }`;
    const variables = { n: 7, ids: ids(4) };
    for (const name of ["A", "B", "A", "B", "C"]) {
      const [answer] = sendInTurn(query, [variables], name);
      expect(answer?.remembered).toEqual(answer?.fresh);
    }
    const document = parse(query);
    const check = createRequestLimitsCheck(schema, limits);
    expect([check(requestOf(document, variables, "A")), check(requestOf(document, variables, "B")), check(requestOf(document, variables, "C"))]).toEqual([
      14,
      8,
      null,
    ]);
  });

  it("when a document expands past the selections pricing walks, then it is refused each time as fresh", () => {
    // Each fragment spreads the next twice at the same level: no depth, no alias, 2^14 selections.
    const fragments = Array.from({ length: 14 }, (_, i) => `fragment F${i} on Post { id ...F${i + 1} ...F${i + 1} }`).join(" ");
    const query = `query($ids: [ID!]!) { posts(ids: $ids) { ...F0 } } ${fragments} fragment F14 on Post { id }`;
    const answers = sendInTurn(query, [{ ids: ids(1) }, { ids: ids(2) }, { ids: ids(1) }]);
    for (const { remembered, fresh } of answers) expect(remembered).toEqual(fresh);
    expect(answers[0]?.remembered).toMatchObject({ extensions: { code: "QUERY_TOO_COSTLY", cost: null } });
  });
  it("when 400 mixed variable sets, valid and not, go to one document in turn, then every answer is the fresh one", () => {
    const query = `query($n: Int, $m: Int! = 3, $ids: [ID!]!, $after: String, $deep: Boolean!) {
      posts(ids: $ids) { id comments(first: $m, after: $after) @include(if: $deep) { edges { node { id } } } }
      feed(first: $n) { edges { node { author { id } } } }
    }`;
    // Mostly values of each variable's type (a few lengths, numbers, booleans), some that are not.
    const valid = (values: unknown[], invalid: unknown[]) => [...values, ...values, ...values, ...invalid];
    const odd: unknown[] = [null, undefined, 2 ** 31, 2.5, "x\u0000", { a: 1 }];
    const pools: Record<string, unknown[]> = {
      n: valid([undefined, null, 0, 1, 7, 100, -1], ["7", ...odd]),
      m: valid([undefined, 1, 3, 20, 100], [null, true]),
      ids: valid([ids(1), ids(2), ids(30), [1, "2"], [], "1"], [["1", "\u0000"], ["1", null], ["1", 2.5], [["1"]], ...odd]),
      after: valid([undefined, null, "", "abc"], ["a\u0000", 5]),
      deep: valid([true, false], [undefined, null, "true"]),
    };
    // A fixed sequence (a linear congruential generator), so a failure can be replayed.
    let seed = 1;
    const pick = (pool: unknown[]) => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return pool[(seed >> 8) % pool.length];
    };
    const sets = Array.from({ length: 400 }, () => {
      const variables: Record<string, unknown> = {};
      for (const [name, pool] of Object.entries(pools)) {
        const value = pick(pool);
        if (value !== undefined) variables[name] = value;
      }
      return variables;
    });
    const answers = sendInTurn(query, sets);
    for (const [i, { remembered, fresh }] of answers.entries()) expect(remembered, JSON.stringify(sets[i])).toEqual(fresh);
    // The sequence reaches prices (many with a key seen before) as well as refusals.
    expect(answers.filter((a) => "cost" in a.remembered).length).toBeGreaterThan(100);
  });
});
