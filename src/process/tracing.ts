// OpenTelemetry tracing of GraphQL operations, loaded only when
// OTEL_EXPORTER_OTLP_ENDPOINT is set (an entry point imports this module
// dynamically, so without it no OpenTelemetry code is loaded at all).
//
// Spans are made by hand in an Apollo plugin rather than by auto-instrumentation:
// those hooks patch modules as they load, which ESM under tsx does not reliably
// let them do. One SERVER span per operation, child of the caller's W3C
// `traceparent` when one came, named "<type> <name>" as OpenTelemetry's GraphQL
// conventions say. Redis and SQL calls get no spans of their own: Apollo gives a
// plugin no way to make its span the active context around execution, and
// without that a child span cannot find its parent. Their latencies are in the
// API metrics instead.
import type { ApolloServerPlugin } from "@apollo/server";
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, type TextMapGetter } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, BatchSpanProcessor } from "@opentelemetry/sdk-trace-base";
import type { GraphQLFormattedError } from "graphql";
import type { Context } from "../graphql/context.js";
import { ApolloServerErrorCode } from "@apollo/server/errors";

export interface TracingOptions {
  /** The collector's OTLP/HTTP base URL; spans go to `${endpoint}/v1/traces` as JSON. */
  readonly endpoint: string;
  /** `service.name` of every span. */
  readonly serviceName: string;
  /** Extra resource attributes (the process's role, say). */
  readonly attributes?: Readonly<Record<string, string | number>>;
}

export interface Tracing {
  /** Makes a span of every GraphQL operation. */
  readonly plugin: ApolloServerPlugin<Context>;
  /** Sends what is still buffered and stops. */
  close(): Promise<void>;
}

/** Apollo's HeaderMap is a Map of lower-case names. */
const headerGetter: TextMapGetter<Map<string, string>> = {
  get: (headers, key) => headers.get(key.toLowerCase()),
  keys: (headers) => [...headers.keys()],
};

const codeOf = (error: GraphQLFormattedError): string =>
  typeof error.extensions?.code === "string" ? error.extensions.code : ApolloServerErrorCode.INTERNAL_SERVER_ERROR;

export function startTracing(options: TracingOptions): Tracing {
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": options.serviceName, ...options.attributes }),
    spanProcessors: [
      new BatchSpanProcessor(
        new OTLPTraceExporter({ url: new URL("v1/traces", options.endpoint.endsWith("/") ? options.endpoint : `${options.endpoint}/`).toString() }),
      ),
    ],
  });
  const tracer = provider.getTracer("like-counter-service");
  const propagator = new W3CTraceContextPropagator();

  const plugin: ApolloServerPlugin<Context> = {
    async requestDidStart({ request }) {
      const parent = request.http ? propagator.extract(ROOT_CONTEXT, request.http.headers, headerGetter) : ROOT_CONTEXT;
      const span = tracer.startSpan("GraphQL operation", { kind: SpanKind.SERVER }, parent);
      return {
        async didResolveOperation({ operation, operationName }) {
          if (!operation) return;
          span.updateName(operationName ? `${operation.operation} ${operationName}` : operation.operation);
          span.setAttribute("graphql.operation.type", operation.operation);
          if (operationName) span.setAttribute("graphql.operation.name", operationName);
        },
        async willSendResponse({ response, contextValue }) {
          const errors = response.body.kind === "single" ? (response.body.singleResult.errors ?? []) : (response.body.initialResult.errors ?? []);
          if (contextValue.viewer) span.setAttribute("enduser.id", String(contextValue.viewer.userId));
          if (response.http.status) span.setAttribute("http.response.status_code", response.http.status);
          if (errors.length > 0) {
            const codes = errors.map(codeOf);
            span.setAttribute("graphql.error.codes", codes);
            span.setStatus({ code: SpanStatusCode.ERROR, message: errors[0]?.message });
            for (const error of errors) span.addEvent("graphql.error", { "error.code": codeOf(error), "error.message": error.message });
          }
          span.end();
        },
      };
    },
  };
  return { plugin, close: () => provider.shutdown() };
}
