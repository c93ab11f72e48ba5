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
    const result = await executor({ document, operation: getOperationAST(document), request: { variables: {} }, context: {} } as unknown as GatewayGraphQLRequestContext);
    expect(result.errors?.map((e) => e.extensions?.code)).toEqual(["OPERATION_NOT_SUPPORTED"]);
    expect(subscribed).toBe(false);
  });
});
