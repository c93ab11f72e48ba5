// The handles a case's hooks (prepare, inject, afterSettled) get on the running
// case: its stores, its service, its load and its timeline.
import type { CaseService } from "./case-service.js";
import type { CaseStores } from "./case-stores.js";
import type { FaultContext } from "./case.js";
import type { Cast } from "./cast.js";
import type { LoadRun } from "./load.js";
import { jwtSecret, note, partitions, type RunningCase } from "./running-case.js";

export function createFaultContext(run: RunningCase, stores: CaseStores, service: CaseService, cast: Cast, tag: string): FaultContext {
  return {
    redis: stores.redis,
    cluster: stores.cluster,
    redisClient: stores.redisClient,
    failOverTo: stores.retarget,
    partitions,
    redisProxy: stores.redisProxy,
    amqpProxy: stores.amqpProxy,
    postgres: run.instances.postgres,
    databaseUrl: stores.databaseUrl,
    hotPostId: (cast.posts[0] as { id: string }).id,
    api: service.api,
    httpBase: `http://127.0.0.1:${service.apiPort}`,
    cast,
    tag,
    jwtSecret,
    get load(): LoadRun {
      if (!run.load) throw new Error("the load has not started yet");
      return run.load;
    },
    process: (role) => service.process(role),
    restart: (role) => service.restart(role),
    startApi: (name, env) => service.startApi(name, env),
    settle: (timeoutMs) => service.settle(timeoutMs),
    ownPosts(ids) {
      for (const id of ids) run.casePosts.add(id);
    },
    figure(figure) {
      run.figures.push(figure);
      run.progress(`${figure.name}: ${figure.value}`);
    },
    defer(close) {
      run.cleanup.push(close);
    },
    reconcile: () => service.reconcile(),
    elapsedMs: () => run.elapsedMs(),
    note: (event) => note(run, event),
  };
}
