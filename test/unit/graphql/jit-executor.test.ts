import type { GatewayGraphQLRequestContext } from "@apollo/server-gateway-interface";
import { buildSchema, getOperationAST, parse } from "graphql";
import { describe, expect, it } from "vitest";
import { jitGateway } from "../../../src/graphql/jit-executor.js";

describe("jit executor", () => {
  it("when a subscription operation reaches the executor over HTTP, then it answers OPERATION_NOT_SUPPORTED without running it", async () => {
    let subscribed = false;
    const schema = buildSchema(`type Query { a: Int } type Subscription { ticks: Int }`);
    const ticks = schema.getSubscriptionType()?.getFields().ticks;
    if (ticks) {
      ticks.subscribe = () => {
        subscribed = true;
        return (async function* () {})();
      };
    }
    const { executor } = await jitGateway(schema).load({ apollo: { key: undefined, keyHash: undefined, graphRef: undefined } });
    if (!executor) throw new Error("the gateway loaded no executor");
    const document = parse("subscription { ticks }");
    const result = await executor({
      document,
      operation: getOperationAST(document),
      request: { variables: {} },
      context: {},
    } as unknown as GatewayGraphQLRequestContext);
    expect(result.errors?.map((e) => e.extensions?.code)).toEqual(["OPERATION_NOT_SUPPORTED"]);
    expect(subscribed).toBe(false);
  });

  it("when anonymous requests of hotPosts arrive while one executes, then they share its execution; a viewer's, another query's and a later one run their own", async () => {
    let runs = 0;
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    const schema = buildSchema(`type Query { hotPosts(first: Int): [Int!]! other: Int }`);
    const fields = schema.getQueryType()?.getFields();
    if (fields?.hotPosts)
      fields.hotPosts.resolve = async (_, args: { first: number }) => {
        runs++;
        await gate;
        return [args.first];
      };
    if (fields?.other)
      fields.other.resolve = () => {
        runs++;
        return 1;
      };
    const { executor } = await jitGateway(schema).load({ apollo: { key: undefined, keyHash: undefined, graphRef: undefined } });
    if (!executor) throw new Error("the gateway loaded no executor");
    const hot = parse("query($n: Int) { hotPosts(first: $n) }");
    const other = parse("{ other hotPosts(first: 1) }");
    const send = (document: typeof hot, variables: Record<string, unknown>, viewer: unknown = null) =>
      executor({ document, operation: getOperationAST(document), request: { variables }, context: { viewer } } as unknown as GatewayGraphQLRequestContext);

    const together = [send(hot, { n: 3 }), send(hot, { n: 3 }), send(hot, { n: 3 }), send(hot, { n: 4 }), send(hot, { n: 3 }, { userId: 7n }), send(other, {})];
    release();
    const results = await Promise.all(together);
    expect(results.map((r) => r.data)).toEqual([
      { hotPosts: [3] },
      { hotPosts: [3] },
      { hotPosts: [3] },
      { hotPosts: [4] },
      { hotPosts: [3] },
      { other: 1, hotPosts: [1] },
    ]);
    // n: 3 once for the three anonymous, n: 4, the viewer's, and the other query's two fields.
    expect(runs).toBe(5);
    expect(results[0]).not.toBe(results[1]);
    await send(hot, { n: 3 });
    expect(runs).toBe(6);
  });
});
