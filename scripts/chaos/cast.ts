// The users and posts of a case: registered and written through the API as
// clients make them, before the load starts.
import { setTimeout as sleep } from "node:timers/promises";
import type { Endpoint } from "./endpoint.js";

export type Post = { readonly id: string; readonly authorId: string };

export interface CastUser {
  readonly id: string;
  readonly token: string;
  /** Signs in again with `password`. */
  readonly username: string;
}

/** The password of every user a case registers. */
export const castPassword = "chaos-password-1";

export interface Cast {
  readonly authors: readonly CastUser[];
  readonly likers: readonly CastUser[];
  /** The first is the hot one. */
  readonly posts: readonly Post[];
}

/** How many users of each role and posts a cast has (the load's options carry them). */
export interface CastSize {
  readonly authors: number;
  readonly likers: number;
  readonly posts: number;
}

const register = `mutation($u: String!, $e: String!, $p: String!) { register(username: $u, email: $e, password: $p) { token user { id } } }`;
const signIn = `mutation($u: String!, $p: String!) { login(username: $u, password: $p) { token user { id } } }`;
const createPost = `mutation($t: String!) { createPost(title: $t, body: "chaos") { id } }`;

async function inBatches<T>(count: number, size: number, make: (i: number) => Promise<T>): Promise<T[]> {
  const made: T[] = [];
  for (let i = 0; i < count; i += size) made.push(...(await Promise.all(Array.from({ length: Math.min(size, count - i) }, (_, j) => make(i + j)))));
  return made;
}

/** Registers the authors and likers and has the authors write the posts, round robin. */
export async function createCast(api: Endpoint, tag: string, options: CastSize): Promise<Cast> {
  type Registered = { register: { token: string; user: { id: string } } };
  const user = async (role: string, i: number) => {
    const name = `${tag}_${role}${i}`;
    for (let attempt = 0; ; attempt++) {
      try {
        const answer = await api.call(register, { u: name, e: `${name}@chaos.example`, p: castPassword });
        const r = (answer.data as Registered | null | undefined)?.register;
        if (r && !answer.errors?.length) return { id: r.user.id, token: r.token, username: name };
        // An earlier attempt answered with an error (or not at all) but registered the user: sign in instead.
        if (attempt > 0 && answer.errors?.[0]?.extensions?.code === "BAD_USER_INPUT") {
          const { login: l } = await api.must<{ login: Registered["register"] }>(signIn, { u: name, p: castPassword });
          return { id: l.user.id, token: l.token, username: name };
        }
        if (attempt >= 19) throw new Error(`registering ${name} kept failing: ${JSON.stringify(answer.errors)}`);
      } catch (error) {
        if (attempt >= 19) throw error;
      }
      await sleep(500);
    }
  };
  const authors = await inBatches(options.authors, 4, (i) => user("a", i));
  const likers = await inBatches(options.likers, 4, (i) => user("u", i));
  const posts: Post[] = [];
  for (let i = 0; i < options.posts; i++) {
    const author = authors[i % authors.length] as (typeof authors)[number];
    const { createPost: p } = await api.must<{ createPost: { id: string } }>(createPost, { t: `${tag} post ${i}` }, author.token);
    posts.push({ id: p.id, authorId: author.id });
  }
  return { authors, likers, posts };
}
