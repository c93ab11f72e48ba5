// The default limits let every query the docs, tests and benchmarks send pass,
// and refuse the hostile documents of issue 10.
import { getOperationAST, parse } from "graphql";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/config.js";
import { measureOperation } from "../../../src/graphql/limits/operation-shape.js";
import { createVariablesSignature, queryCost } from "../../../src/graphql/limits/query-cost.js";
import { createSchema } from "../../../src/graphql/schema.js";

const limits = loadConfig({}).limits;
const schema = createSchema();
const hundredIds = Array.from({ length: 100 }, (_, i) => String(i + 1));

function measure(query: string, variables: Record<string, unknown> = {}) {
  const document = parse(query);
  const operation = getOperationAST(document);
  if (!operation) throw new Error("no operation");
  const priced = queryCost(schema, document, undefined, variables);
  if (!("cost" in priced)) throw new Error(`not priced: ${JSON.stringify(priced)}`);
  return { ...measureOperation(document, operation), cost: priced.cost };
}

/** The heaviest queries the docs, the tests and scripts/bench send. */
const sent: [string, Record<string, unknown>][] = [
  [`{ feed(first: 3) { edges { node { id title counts { likes comments } viewerHasLiked } } } }`, {}],
  [`query($ids: [ID!]!) { posts(ids: $ids) { id counts { likes reads comments } viewerHasLiked } }`, { ids: hundredIds }],
  [`query($ids: [ID!]!) { posts(ids: $ids) { id counts { likes } author { id counts { likesReceived } } } }`, { ids: hundredIds }],
  [
    `query($id: ID!) { post(id: $id) { counts { comments } comments(first: 10) { edges { node { id counts { replies } replies { edges { node { id parent { id } } } } } } } } }`,
    { id: "1" },
  ],
  [
    `query($id: ID!, $after: String) { post(id: $id) { likers(first: 20, after: $after) { edges { node { id } } pageInfo { hasNextPage endCursor } } } }`,
    { id: "1", after: null },
  ],
  [`mutation($id: ID!) { likePost(postId: $id) { changed post { id counts { likes } viewerHasLiked } } }`, { id: "1" }],
  [`{ feed(first: 101) { edges { cursor } } }`, {}],
];

describe("default request limits", () => {
  it.each(sent)("when %s is measured, then it is within every default limit", (query, variables) => {
    const m = measure(query, variables);
    expect(m.depth).toBeLessThanOrEqual(limits.depth);
    expect(m.aliases).toBeLessThanOrEqual(limits.aliases);
    expect(m.rootFields).toBeLessThanOrEqual(limits.mutations);
    expect(m.cost).toBeLessThanOrEqual(limits.cost);
  });

  it("when _entities asks for 100 posts, then it costs what posts(ids:) with the same selection costs", () => {
    const selection = "id counts { likes } viewerHasLiked author { id counts { likesReceived } }";
    const representations = hundredIds.map((id) => ({ __typename: "Post", id }));
    const entities = measure(`query($r: [_Any!]!) { _entities(representations: $r) { ... on Post { ${selection} } } }`, { r: representations });
    const posts = measure(`query($ids: [ID!]!) { posts(ids: $ids) { ${selection} } }`, { ids: hundredIds });
    expect(entities.cost).toBe(posts.cost);
    // 100 × (1 + counts 1 + author (1 + counts 1)).
    expect(entities.cost).toBe(400);
  });

  it("when two _entities calls send as many different representations, then their prices share one key, and a missing list has none", () => {
    const operation = getOperationAST(parse(`query($r: [_Any!]!) { _entities(representations: $r) { ... on Post { id } } }`));
    if (!operation) throw new Error("no operation");
    const signature = createVariablesSignature(schema, operation);
    const key = signature({ r: hundredIds.map((id) => ({ __typename: "Post", id })) });
    expect(key).not.toBeNull();
    expect(signature({ r: hundredIds.map((id) => ({ __typename: "User", id: `${id}0` })) })).toBe(key);
    expect(signature({ r: hundredIds.slice(1).map((id) => ({ __typename: "Post", id })) })).not.toBe(key);
    expect(signature({})).toBeNull();
  });

  it("when the nested comments query is measured, then its cost is far above the limit", () => {
    const m = measure(`{ feed(first:100){edges{node{comments(first:100){edges{node{post{comments(first:100){edges{node{id}}}}}}}}}} }`);
    expect(m.cost).toBe(3_040_300);
    expect(m.cost).toBeGreaterThan(limits.cost);
  });

  it("when 450 aliased likePost mutations are measured, then aliases and root fields are both over their limits", () => {
    const m = measure(`mutation {${Array.from({ length: 450 }, (_, i) => ` l${i}: likePost(postId: "1") { changed }`).join("")} }`);
    expect(m).toMatchObject({ aliases: 450, rootFields: 450 });
    expect(m.aliases).toBeGreaterThan(limits.aliases);
    expect(m.rootFields).toBeGreaterThan(limits.mutations);
  });

  it("when introspection is measured, then it is not counted as deep", () => {
    expect(
      measure(
        `{ __schema { types { fields { type { ofType { ofType { ofType { ofType { ofType { ofType { ofType { ofType { ofType { name } } } } } } } } } } } } } }`,
      ).depth,
    ).toBe(0);
  });

  it("when a fragment is spread twice, then its aliases count twice and identical root fields once", () => {
    const m = measure(`mutation { a: likePost(postId: "1") { ...P } b: likePost(postId: "2") { ...P } } fragment P on PostLikePayload { c: changed }`);
    expect(m).toMatchObject({ aliases: 4, rootFields: 2, depth: 2 });
  });
});
