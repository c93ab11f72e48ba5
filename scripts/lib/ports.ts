import { createServer } from "node:net";

/** Whether `port` on 127.0.0.1 can be listened on now. */
function listenable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/** A TCP port on 127.0.0.1 that nothing listens on right now. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address ? resolve(address.port) : reject(new Error("no free port"))));
    });
  });
}

/**
 * A free port for a Redis Cluster node: at most 55535, since a node listens for its cluster bus
 * 10000 higher (redis-server refuses a higher port with cluster-enabled), and with that bus port free too.
 * freePort's ephemeral ports reach 60999 here.
 */
export async function freeClusterPort(): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 35_535);
    if ((await listenable(port)) && (await listenable(port + 10_000))) return port;
  }
  throw new Error("no free port pair (port and port + 10000) for a Redis Cluster node");
}
