import type { GatewayGraphQLRequestContext } from "@apollo/server-gateway-interface";
import { GraphQLScalarType, buildSchema, getOperationAST, parse, type DocumentNode, type ExecutionResult } from "graphql";
import { describe, expect, it } from "vitest";
import { jitExecution } from "../../../src/graphql/jit-executor.js";

const schema = buildSchema(`
  scalar DateTime
  type Counts { likes: Int! reads: Int! }
  type Post { id: ID! title: String counts: Counts! createdAt: DateTime! }
  type Query { posts(ids: [ID!]!): [Post]! fails: Int }
`);
const dateTime = schema.getType("DateTime") as GraphQLScalarType;
dateTime.serialize = (value) => (value as Date).toISOString();
const fields = schema.getQueryType()?.getFields();
if (fields?.posts) {
  fields.posts.resolve = (_, args: { ids: string[] }) =>
    args.ids.map((id) => (id === "0" ? null : { id, title: `"Post" ${id} \u2028 \ud800`, counts: { likes: Number(id), reads: 0 }, createdAt: new Date(0) }));
}
if (fields?.fails)
  fields.fails.resolve = () => {
    throw new Error("no");
  };

async function start() {
  const execution = jitExecution(schema);
  const { executor } = await execution.gateway.load({ apollo: { key: undefined, keyHash: undefined, graphRef: undefined } });
  if (!executor) throw new Error("the gateway loaded no executor");
  const run = (document: DocumentNode, variables: Record<string, unknown> = {}) =>
    executor({
      document,
      operation: getOperationAST(document),
      request: { variables },
      context: {},
    } as unknown as GatewayGraphQLRequestContext) as Promise<ExecutionResult>;
  // As Apollo hands a result to stringifyResult: errors formatted, the fields in this order.
  const body = (result: ExecutionResult) =>
    execution.stringifyResult({ errors: result.errors?.map((e) => e.toJSON()), data: result.data, extensions: result.extensions });
  return { run, body };
}

/** A field the operation did not select, added after execution: the compiled serializer leaves it out, JSON.stringify writes it. */
function markUnselected(result: ExecutionResult): ExecutionResult {
  (result.data as Record<string, unknown>).unselected = 1;
  return result;
}

describe("jit executor's serialization", () => {
  const feed = parse("query($ids: [ID!]!) { posts(ids: $ids) { id title counts { likes reads } } }");

  it("when an operation runs the first time, then its response is JSON.stringify's; from the second, the compiled serializer's, byte for byte the same", async () => {
    const { run, body } = await start();
    const variables = { ids: ["1", "0", "22"] };
    const first = await run(feed, variables);
    expect(body(first)).toBe(`${JSON.stringify({ data: first.data })}\n`);
    expect(body(markUnselected(first))).toContain("unselected");

    const second = await run(feed, variables);
    expect(body(second)).toBe(`${JSON.stringify({ data: second.data })}\n`);
    expect(body(markUnselected(second))).not.toContain("unselected");
    expect(body(markUnselected(await run(feed, { ids: ["3"] })))).toBe(
      '{"data":{"posts":[{"id":"3","title":"\\"Post\\" 3 \u2028 \\ud800","counts":{"likes":3,"reads":0}}]}}\n',
    );
  });

  it("when a result has errors, then it is written by JSON.stringify with them", async () => {
    const { run, body } = await start();
    const document = parse('{ fails posts(ids: ["1"]) { id } }');
    await run(document);
    const result = await run(document);
    expect(result.errors).toHaveLength(1);
    expect(JSON.parse(body(markUnselected(result)))).toMatchObject({ errors: [{ message: "no", path: ["fails"] }], data: { fails: null, unselected: 1 } });
  });

  it("when an operation selects a custom scalar, then its responses stay JSON.stringify's", async () => {
    const { run, body } = await start();
    const document = parse('{ posts(ids: ["5"]) { id createdAt } }');
    await run(document);
    const result = markUnselected(await run(document));
    expect(body(result)).toBe('{"data":{"posts":[{"id":"5","createdAt":"1970-01-01T00:00:00.000Z"}],"unselected":1}}\n');
  });
});
