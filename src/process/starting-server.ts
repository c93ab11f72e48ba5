// What an API process serves on its port while it waits for its stores at start:
// liveness (the process is fine; restarting it would not bring a store back),
// readiness 503 saying what it waits for, and SERVICE_UNAVAILABLE to everything else.
import { createServer, type Server } from "node:http";

export interface StartingServer {
  /** Says what the process waits for now, in readiness's answer. */
  waitingFor(reason: string): void;
  close(): Promise<void>;
}

export async function serveWhileStarting(host: string, port: number): Promise<StartingServer> {
  let reason = "starting";
  const server: Server = createServer((request, response) => {
    const path = (request.url ?? "/").split("?")[0];
    // Liveness, as the GraphQL server answers it: the process serves HTTP.
    if (request.method === "GET" && path === "/health/live")
      return void response.writeHead(200, { "content-type": "application/json" }).end('{"status":"live"}');
    if (request.method === "GET" && path === "/health/ready") {
      return void response.writeHead(503, { "content-type": "application/json" }).end(JSON.stringify({ status: "starting", checks: { start: reason } }));
    }
    request.resume();
    const body = {
      errors: [{ message: `The service is starting and cannot answer yet: ${reason}. Try again shortly.`, extensions: { code: "SERVICE_UNAVAILABLE" } }],
    };
    response.writeHead(503, { "content-type": "application/json", "retry-after": "1", connection: "close" }).end(JSON.stringify(body));
  });
  // A connection kept alive would keep the port's next server from having it.
  server.keepAliveTimeout = 1;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  return {
    waitingFor(next) {
      reason = next;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
