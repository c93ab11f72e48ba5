// The opaque cursors of connections and the positions they stand for: an id
// (comments, replies), a member's position (likers, followers) and a list
// position (liked, collected, followed). A cursor this service did not issue is
// BAD_USER_INPUT naming the argument, never a query PostgreSQL would refuse.
import { maxId, type ListPosition, type MemberPosition, decimalIdSource } from "../domain/model/index.js";
import { badInput } from "../errors.js";

/** Opaque cursor for keyset paging over descending or ascending ids. */
export function encodeCursor(id: bigint): string {
  return Buffer.from(`c:${id}`).toString("base64url");
}

const idCursor = new RegExp(`^c:(${decimalIdSource})$`);

export function decodeCursor(cursor: string, field = "after"): bigint {
  const match = idCursor.exec(Buffer.from(cursor, "base64url").toString());
  // Nineteen digits can still exceed a bigint column, which PostgreSQL would refuse mid-query.
  if (!match?.[1] || BigInt(match[1]) > maxId) throw badInput(field, `${field} is not a cursor this service issued; pass a pageInfo.endCursor back unchanged.`);
  return BigInt(match[1]);
}

/** The last millisecond PostgreSQL's timestamps (and the ISO text the stores send) can name. */
export const lastMillisecondOf9999 = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

/** A place in a list ordered by time, then id: `<tag>:<ms>:<id>`; the tag keeps one list's cursors out of another. */
type Tag = "l" | "p";
const positionCursor = new RegExp(`^([lp]):(\\d{1,15}):(${decimalIdSource})$`);

function encodePosition(tag: Tag, at: Date, id: bigint): string {
  return Buffer.from(`${tag}:${at.getTime()}:${id}`).toString("base64url");
}

function decodePosition(tag: Tag, cursor: string): { at: Date; id: bigint } {
  const match = positionCursor.exec(Buffer.from(cursor, "base64url").toString());
  if (!match || match[1] !== tag || Number(match[2]) > lastMillisecondOf9999 || BigInt(match[3] as string) > maxId) {
    throw badInput("after", "after is not a cursor of this list that this service issued; pass a pageInfo.endCursor back unchanged.");
  }
  return { at: new Date(Number(match[2])), id: BigInt(match[3] as string) };
}

/** A member's place among a target's members (likers, followers). */
export const encodeMemberCursor = (p: MemberPosition): string => encodePosition("l", p.at, p.userId);

export function decodeMemberCursor(cursor: string): MemberPosition {
  const { at, id } = decodePosition("l", cursor);
  return { at, userId: id };
}

/** A target's place in a user's list (liked, collected). */
export const encodeListCursor = (p: ListPosition): string => encodePosition("p", p.at, p.targetId);

export function decodeListCursor(cursor: string): ListPosition {
  const { at, id } = decodePosition("p", cursor);
  return { at, targetId: id };
}
