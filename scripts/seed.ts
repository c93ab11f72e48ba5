// Fills the configured database and Redis with demo users, posts, comments, likes,
// collects, follows and views, through the same use cases the API runs. Safe to run
// again: it adds more posts.
// Usage: npm run seed [-- <users> <posts>]   (defaults: 20 users, 100 posts)
import { SingleBar, Presets } from "cli-progress";
import { compose } from "../src/compose.js";
import { loadConfig } from "../src/config.js";
import { DomainError } from "../src/errors.js";
import { createLogger } from "../src/process/logger.js";
import { openClients } from "../src/stores/clients.js";

const [users = 20, posts = 100] = process.argv.slice(2).map(Number);
if (!Number.isInteger(users) || !Number.isInteger(posts) || users < 1 || posts < 0) {
  console.error("Usage: npm run seed [-- <users ≥ 1> <posts ≥ 0>]");
  process.exit(2);
}
const config = loadConfig();
const logger = createLogger("warn", "seed");
const clients = await openClients(config, logger);
const services = compose(config, clients, logger).services;
const password = "demo-password-1";

const bar = new SingleBar({ format: "{task} [{bar}] {value}/{total}" }, Presets.shades_classic);
bar.start(users, 0, { task: "users   " });
const sessions = [];
for (let i = 1; i <= users; i++) {
  const username = `demo_${i}`;
  try {
    sessions.push(await services.users.register(username, `${username}@example.com`, password));
  } catch (error) {
    if (!(error instanceof DomainError)) throw error;
    sessions.push(await services.users.login(username, password));
  }
  bar.increment();
}
bar.setTotal(posts);
bar.update(0, { task: "posts   " });
const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)] as T;
for (let i = 1; i <= posts; i++) {
  const author = pick(sessions);
  const post = await services.content.createPost(author.user.id, `Demo post ${i}`, `Written by ${author.user.username}.`);
  const comment = await services.content.createComment(pick(sessions).user.id, post.id, "Nice one.", null);
  await services.content.createComment(pick(sessions).user.id, post.id, "Agreed.", comment.id);
  // Earlier posts get more likes, as popular posts do.
  const likers = sessions.slice(0, Math.max(1, Math.round(sessions.length / Math.sqrt(i))));
  const target = { type: "post", id: post.id } as const;
  await Promise.all(likers.map((s) => services.memberships.join("like", target, s.user.id)));
  // Fewer collect than like, and everyone who sees it views it.
  await Promise.all(likers.filter((_, k) => k % 3 === 0).map((s) => services.memberships.join("collect", target, s.user.id)));
  await services.views.record(sessions.map(() => post.id).slice(0, 100));
  bar.increment();
}
bar.stop();
// Everyone follows the first few users, and the first user follows everyone.
const [first] = sessions;
for (const s of sessions) {
  for (const star of sessions.slice(0, 3)) if (star !== s) await services.memberships.join("follow", { type: "user", id: star.user.id }, s.user.id);
  if (first && s !== first) await services.memberships.join("follow", { type: "user", id: s.user.id }, first.user.id);
}
await services.views.close();
console.log(
  `Seeded ${users} users (password "${password}"), ${posts} posts with likes, collects and views, and follows. A token for ${sessions[0]?.user.username}:`,
);
console.log(sessions[0]?.token);
await clients.close();
