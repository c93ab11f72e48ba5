// The opaque cursors of connections and the positions they stand for: an id
// (comments, replies), a member's position (likers, followers) and a list
// position (liked, collected, followed). A cursor this service did not issue is
// BAD_USER_INPUT naming the argument, never a query PostgreSQL would refuse.
import { maxId, type ListPosition, type MemberPosition } from "../domain/model/index.js";
import { badInput } from "../errors.js";

/** Opaque cursor for keyset paging over descending or ascending ids. */
export function encodeCursor(id: bigint): string {
  return Buffer.from(`c:${id}`).toString("base64url");
}

export function decodeCursor(cursor: string, field = "after"): bigint {
  const text = Buffer.from(cursor, "base64url").toString();
  const match = /^c:([1-9][0-9]{0,18})$/.exec(text);
  // Nineteen digits can still exceed a bigint column, which PostgreSQL would refuse mid-query.
  if (!match?.[1] || BigInt(match[1]) > maxId) throw badInput(field, `${field} is not a cursor this service issued; pass a pageInfo.endCursor back unchanged.`);
  return BigInt(match[1]);
}

/** The last millisecond PostgreSQL's timestamps (and the ISO text the stores send) can name. */
export const lastMillisecondOf9999 = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

export function encodeMemberCursor(p: MemberPosition): string {
  return Buffer.from(`l:${p.at.getTime()}:${p.userId}`).toString("base64url");
}

export function decodeMemberCursor(cursor: string): MemberPosition {
  const match = /^l:(\d{1,15}):([1-9]\d{0,18})$/.exec(Buffer.from(cursor, "base64url").toString());
  if (!match || Number(match[1]) > lastMillisecondOf9999 || BigInt(match[2] as string) > maxId) {
    throw badInput("after", "after is not a cursor of this list that this service issued; pass a pageInfo.endCursor back unchanged.");
  }
  return { at: new Date(Number(match[1])), userId: BigInt(match[2] as string) };
}

export function encodeListCursor(p: ListPosition): string {
  return Buffer.from(`p:${p.at.getTime()}:${p.targetId}`).toString("base64url");
}

export function decodeListCursor(cursor: string): ListPosition {
  const match = /^p:(\d{1,15}):([1-9]\d{0,18})$/.exec(Buffer.from(cursor, "base64url").toString());
  if (!match || Number(match[1]) > lastMillisecondOf9999 || BigInt(match[2] as string) > maxId) {
    throw badInput("after", "after is not a cursor of this list that this service issued; pass a pageInfo.endCursor back unchanged.");
  }
  return { at: new Date(Number(match[1])), targetId: BigInt(match[2] as string) };
}
