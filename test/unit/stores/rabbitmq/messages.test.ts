import { describe, expect, it } from "vitest";
import type { Change, OutboxEntry, Repair, ViewChange } from "../../../../src/domain/model/index.js";
import { parseChange, parseChanges, parseRepair, toChangeBatchMessage, toChangeMessage, toRepairMessage } from "../../../../src/stores/rabbitmq/messages.js";
import { relationChange as change } from "../../../support/changes.js";

const entry = (c: Change): OutboxEntry => ({ partition: 7, entryId: "1-0", change: c });
const views = (count: number, total: number): ViewChange => ({
  kind: "views",
  target: { type: "post", id: 3n },
  count,
  total,
  version: 1795343997282999n,
  at: new Date("2026-11-22T10:00:00.000Z"),
});

describe("change messages", () => {
  it.each<[string, Change]>([
    ["a like", change(42n, 1795343997282123n, true)],
    ["a collect", change(42n, 1795343997282124n, false, 5n, "collect")],
    ["a follow", { ...change(42n, 10n, true, 7n, "follow"), target: { type: "user", id: 7n }, authorId: null }],
    ["views", views(3, 12)],
  ])("when %s goes to the wire and back, then nothing is lost", (_, original) => {
    const message = toChangeMessage(entry(original));
    expect(message.eventId).toBe("7-1-0");
    expect(parseChange(JSON.stringify(message))).toEqual({ kind: "valid", value: original });
  });

  it("when an older relay's like arrives (no kind or relation, liked for member), then it is read as a like", () => {
    const { kind: _, relation: __, member, ...older } = toChangeMessage(entry(change(42n, 9n, true))) as Record<string, unknown>;
    expect(parseChange(JSON.stringify({ ...older, liked: member }))).toEqual({ kind: "valid", value: change(42n, 9n, true) });
  });

  it.each([
    ["not JSON", "{", /not JSON/],
    ["an unknown target type", { ...toChangeMessage(entry(change(1n, 1n, true))), target: { type: "planet", id: "1" } }, /target\.type/],
    ["a relation the target type has none of", { ...toChangeMessage(entry(change(1n, 1n, true))), relation: "follow" }, /target\.type/],
    ["a non-decimal user", { ...toChangeMessage(entry(change(1n, 1n, true))), userId: "01" }, /userId/],
    ["a missing version", { ...toChangeMessage(entry(change(1n, 1n, true))), version: undefined }, /version/],
    ["views of no post", { ...toChangeMessage(entry(views(1, 1))), target: { type: "user", id: "1" } }, /target\.type/],
    ["no views", { ...toChangeMessage(entry(views(1, 1))), count: 0 }, /count/],
  ])("when a message has %s, then it is refused with a reason", (_, body, reason) => {
    const parsed = parseChange(typeof body === "string" ? body : JSON.stringify(body));
    expect(parsed.kind === "invalid" && parsed.reason).toMatch(reason);
  });
});

describe("batches of changes", () => {
  it("when a batch goes to the wire and back, then its changes come back in order", () => {
    const changes = [change(1n, 10n, true), change(2n, 11n, false), views(2, 2), change(1n, 12n, false, 1n, "collect")];
    const body = JSON.stringify(toChangeBatchMessage(changes.map(entry)));
    expect(parseChanges(Buffer.from(body)).map((c) => c.delivery)).toEqual(changes.map((value) => ({ kind: "valid", value })));
  });

  it("when one change of a batch is malformed, then only it is refused, with its own body", () => {
    const good = toChangeMessage(entry(change(1n, 10n, true)));
    const bad = { ...good, userId: "x" };
    const parsed = parseChanges({ changes: [good, bad, good] });
    expect(parsed.map((c) => c.delivery.kind)).toEqual(["valid", "invalid", "valid"]);
    expect(parsed[1]?.body).toEqual(bad);
    expect(parsed[1]?.delivery.kind === "invalid" && parsed[1].delivery.reason).toMatch(/userId/);
  });

  it("when a single change arrives, as an older relay sends it, then it is read as one", () => {
    const original = change(3n, 13n, true);
    expect(parseChanges(JSON.stringify(toChangeMessage(entry(original))))).toEqual([
      { delivery: { kind: "valid", value: original }, body: toChangeMessage(entry(original)) },
    ]);
  });

  it("when a body is not JSON, then the whole message is one refused delivery", () => {
    expect(parseChanges("{").map((c) => c.delivery)).toEqual([{ kind: "invalid", reason: "body is not JSON" }]);
  });
});

describe("repair messages", () => {
  it.each<Repair>([
    { kind: "alignDatabase", relation: "like", target: { type: "comment", id: 9n }, observedVersion: 1795343997282123n, add: [1n, 2n], remove: [3n] },
    { kind: "alignDatabase", relation: "follow", target: { type: "user", id: 9n }, observedVersion: 1n, add: [], remove: [3n] },
    { kind: "recountDatabase", relation: "collect", target: { type: "post", id: 4n } },
    { kind: "recountRedis", relation: "like", target: { type: "post", id: 5n }, observedVersion: 0n },
    { kind: "recountDerived", target: { type: "user", id: 5n }, names: ["following", "likesReceived"] },
    { kind: "mirrorDerived", target: { type: "post", id: 5n }, names: ["comment"] },
    { kind: "alignViews", target: { type: "post", id: 5n }, observedVersion: 12n, views: 40 },
  ])("when a $kind repair goes to the wire and back, then nothing is lost", (repair) => {
    expect(parseRepair(Buffer.from(JSON.stringify(toRepairMessage(repair))))).toEqual({ kind: "valid", value: repair });
  });

  it("when a repair published before relations existed arrives, then it is about likes", () => {
    const { relation: _, ...older } = toRepairMessage({ kind: "recountDatabase", relation: "like", target: { type: "post", id: 4n } }) as Record<
      string,
      unknown
    >;
    expect(parseRepair(JSON.stringify(older))).toEqual({
      kind: "valid",
      value: { kind: "recountDatabase", relation: "like", target: { type: "post", id: 4n } },
    });
  });

  it("when a repair names an id that is not decimal or a counter that is not derived, then it is refused with a reason", () => {
    const body = { ...toRepairMessage({ kind: "recountDatabase", relation: "like", target: { type: "post", id: 4n } }), target: { type: "post", id: "4x" } };
    const parsed = parseRepair(JSON.stringify(body));
    expect(parsed.kind === "invalid" && parsed.reason).toMatch(/target\.id/);
    const notDerived = parseRepair(JSON.stringify({ kind: "mirrorDerived", target: { type: "post", id: "4" }, names: ["like"] }));
    expect(notDerived.kind === "invalid" && notDerived.reason).toMatch(/names/);
  });
});
