// A response refused for want of a store (SERVICE_UNAVAILABLE, OVER_CAPACITY)
// says when to come back: HTTP Retry-After with the longest wait its errors
// name, and, when nothing of it could be answered (data null), HTTP 503, which
// proxies, load balancers and HTTP clients treat as "retry later" rather than as
// a success that happened to carry errors.
import type { ApolloServerPlugin } from "@apollo/server";
import { ErrorCode } from "../../errors.js";
import type { Context } from "../context.js";
import { unavailableRetrySeconds } from "../format-error.js";

const refusedForStores = new Set<unknown>([ErrorCode.SERVICE_UNAVAILABLE, ErrorCode.OVER_CAPACITY]);

export function unavailablePlugin(): ApolloServerPlugin<Context> {
  return {
    async requestDidStart() {
      return {
        async willSendResponse({ response }) {
          if (response.body.kind !== "single") return;
          const { data, errors } = response.body.singleResult;
          let waitSeconds = 0;
          for (const error of errors ?? []) {
            if (!refusedForStores.has(error.extensions?.code)) continue;
            const named = error.extensions?.retryAfterSeconds;
            waitSeconds = Math.max(waitSeconds, typeof named === "number" && named > 0 ? named : unavailableRetrySeconds);
          }
          if (waitSeconds === 0) return;
          // A rate limit's answer (429 and its own Retry-After) stands.
          if (response.http.headers.has("retry-after")) return;
          response.http.headers.set("retry-after", String(Math.ceil(waitSeconds)));
          if (data == null && (response.http.status === undefined || response.http.status === 200)) response.http.status = 503;
        },
      };
    },
  };
}
