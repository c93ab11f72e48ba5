// One subscription's stream: the counts at subscribing, then a post's first change at
// once, then at most one message per post an interval.
import { describe, expect, it } from "vitest";
import { Stream } from "../../../src/domain/count-stream.js";

/** Whether `pending` settled by the next turn of the event loop: "sent", or still "held". */
const settledNow = (pending: Promise<unknown>) => Promise.race([pending.then(() => "sent"), new Promise((resolve) => setImmediate(() => resolve("held")))]);

describe("a subscription's stream of counts", () => {
  it("when a post changes right after its first counts, then the change is sent at once, and the next one waits for the interval", async () => {
    // An interval no test run reaches: a message it holds stays held.
    const stream = new Stream([7n], 3_600_000, () => {});
    stream.offer(7n, { like: 0 }, 1);
    expect((await stream.next()).value).toEqual({ postId: 7n, counts: { like: 0 } });
    stream.offer(7n, { like: 1 }, 2);
    expect(await settledNow(stream.next().then((result) => expect(result.value).toEqual({ postId: 7n, counts: { like: 1 } })))).toBe("sent");
    stream.offer(7n, { like: 2 }, 3);
    const third = stream.next();
    expect(await settledNow(third)).toBe("held");
    stream.end();
    expect((await third).done).toBe(true);
  });

  it("when the interval has passed since a post's last message, then its newest counts are sent, superseding those in between", async () => {
    const stream = new Stream([7n], 50, () => {});
    stream.offer(7n, { like: 0 }, 1);
    await stream.next();
    stream.offer(7n, { like: 1 }, 2);
    await stream.next();
    stream.offer(7n, { like: 2 }, 3);
    stream.offer(7n, { like: 3 }, 4);
    expect((await stream.next()).value).toEqual({ postId: 7n, counts: { like: 3 } });
    stream.end();
  });
});
