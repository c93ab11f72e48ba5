// Subscriptions, served over WebSocket (live/live-server.ts). Each event carries the
// counts that changed, primed into the event's loaders so the selection reads
// them without another round trip.
import { parseId } from "../arguments.js";
import type { CountStream } from "../../domain/live-counts.js";
import type { Counts, Post } from "../../domain/model/index.js";
import { badInput, DomainError, ErrorCode, notFound } from "../../errors.js";
import { coldReadsOf } from "../cold-reads.js";
import type { Context } from "../context.js";
import { mapIterator } from "../live/map-iterator.js";

export const maxPostsPerSubscription = 100;

export interface PostCountsEvent {
  readonly post: Post;
  readonly counts: Counts;
}

/**
 * One event per read of a post's counts, whichever subscriptions it goes to: every
 * subscriber of the post gets the same object, so the execution of one selection
 * can be shared by all who sent it (live/live-server.ts).
 */
const eventsOfReads = new WeakMap<Counts, PostCountsEvent>();

/** The stream's updates as events of their posts; ending it ends the stream at once, even while it waits. */
function asEvents(stream: CountStream, posts: ReadonlyMap<bigint, Post>): AsyncIterableIterator<PostCountsEvent> {
  return mapIterator(stream, ({ postId, counts }) => {
    const post = posts.get(postId);
    if (!post) return undefined;
    let event = eventsOfReads.get(counts);
    if (!event) eventsOfReads.set(counts, (event = { post, counts }));
    return event;
  });
}

export const Subscription = {
  postCounts: {
    async subscribe(_: unknown, args: { postIds: string[] }, ctx: Context): Promise<AsyncIterableIterator<PostCountsEvent>> {
      const live = ctx.services.live;
      if (!live) throw new DomainError(ErrorCode.SERVICE_UNAVAILABLE, "This process does not serve live counts.");
      if (args.postIds.length === 0) throw badInput("postIds", "Name at least one post.");
      if (args.postIds.length > maxPostsPerSubscription) {
        throw badInput("postIds", `postCounts takes at most ${maxPostsPerSubscription} ids; got ${args.postIds.length}. Subscribe again for the rest.`);
      }
      const ids = [...new Set(args.postIds.map((id) => parseId(id, "postIds")))];
      const rows = await ctx.services.catalog.posts(ids);
      const posts = new Map<bigint, Post>();
      ids.forEach((id, i) => {
        const row = rows[i];
        if (!row) throw notFound("post", id);
        posts.set(id, row);
      });
      // The first counts of posts Redis does not hold come from PostgreSQL, paid as a query's would be.
      return asEvents(await live.watch(ids, coldReadsOf(ctx.services, ctx.viewer, ctx.clientIp, ctx.charged)), posts);
    },
    resolve(event: PostCountsEvent, _: unknown, ctx: Context): Post {
      ctx.loaders.readouts.set({ type: "post", id: event.post.id }, { counts: event.counts, viewerIn: {} });
      return event.post;
    },
  },
};
