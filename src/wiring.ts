// Builds stores and services from clients an entry point has opened.
import { createCatalog, findOne } from "./domain/catalog.js";
import { createContentService } from "./domain/content.js";
import { createCounterService, type TargetLookup } from "./domain/counters.js";
import { createTokenService } from "./domain/identity.js";
import { createLikeService } from "./domain/likes.js";
import type { Services } from "./domain/services.js";
import { createUserService } from "./domain/users.js";
import type { Config } from "./config.js";
import { createCommentStore } from "./stores/postgres/comment-store.js";
import type { Database } from "./stores/postgres/database.js";
import { createSnapshotStore } from "./stores/postgres/snapshot-store.js";
import { createPersistedLikeStore } from "./stores/postgres/like-store.js";
import { createPostStore } from "./stores/postgres/post-store.js";
import { createUserStore } from "./stores/postgres/user-store.js";
import type { RedisClient } from "./stores/redis/client.js";
import { createCounterStore } from "./stores/redis/counter-store.js";
import { createRedisKeys } from "./stores/redis/keys.js";
import { createLikeStore } from "./stores/redis/like-store.js";
import { createRebuildStore } from "./stores/redis/rebuild-store.js";

export interface Clients {
  readonly db: Database;
  readonly redis: RedisClient;
}

export function createServices(config: Config, { db, redis }: Clients): Services {
  const keys = createRedisKeys(config.redisPartitions);
  const userStore = createUserStore(db);
  const postStore = createPostStore(db);
  const commentStore = createCommentStore(db);
  const catalog = createCatalog({ users: userStore, posts: postStore, comments: commentStore });

  const lookup: TargetLookup = async (target) => {
    switch (target.type) {
      case "post":
        return findOne(catalog.posts, target.id);
      case "comment":
        return findOne(catalog.comments, target.id);
      case "user":
        return (await findOne(catalog.users, target.id)) ? { authorId: null } : null;
    }
  };
  const counters = createCounterService({
    counterStore: createCounterStore(redis, keys),
    rebuildStore: createRebuildStore(redis, keys),
    snapshots: createSnapshotStore(db),
    lookup,
  });
  const tokens = createTokenService({ secret: config.jwtSecret, ttlSeconds: config.tokenTtlSeconds });
  return {
    catalog,
    counters,
    tokens,
    likes: createLikeService({ likeStore: createLikeStore(redis, keys), persistedLikes: createPersistedLikeStore(db), counters }),
    users: createUserService({ users: userStore, tokens, counters }),
    content: createContentService({
      posts: postStore,
      comments: commentStore,
      counters,
      findPost: (id) => findOne(catalog.posts, id),
      findComment: (id) => findOne(catalog.comments, id),
    }),
  };
}
