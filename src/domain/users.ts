// Accounts: registration and sign-in.
import { badInput, DomainError, ErrorCode } from "../errors.js";
import type { CounterService } from "./counters.js";
import { hashPassword, verifyPassword, type TokenService } from "./identity.js";
import type { User } from "./model.js";
import type { UserStore } from "./ports.js";

export interface Session {
  readonly token: string;
  readonly user: User;
}

export interface UserService {
  register(username: string, email: string, password: string): Promise<Session>;
  login(username: string, password: string): Promise<Session>;
}

export function validateRegistration(username: string, email: string, password: string): void {
  if (!/^[A-Za-z0-9_]{3,32}$/.test(username)) {
    throw badInput("username", "username must be 3 to 32 letters, digits or underscores.");
  }
  if (email.length > 254 || !/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(email)) {
    throw badInput("email", "email must be an address such as name@example.com.");
  }
  if (password.length < 8 || password.length > 128 || !/[A-Za-z]/.test(password) || !/[0-9]/.test(password)) {
    throw badInput("password", "password must be 8 to 128 characters with at least one letter and one digit.");
  }
}

export function createUserService(deps: { users: UserStore; tokens: TokenService; counters: CounterService }): UserService {
  const { users, tokens, counters } = deps;
  return {
    async register(username, email, password) {
      validateRegistration(username, email, password);
      const outcome = await users.create({ username, email: email.toLowerCase(), passwordHash: await hashPassword(password) });
      if ("taken" in outcome) throw badInput(outcome.taken, `That ${outcome.taken} is already registered; choose another.`);
      const user = outcome.created;
      await counters.initNew({ type: "user", id: user.id });
      return { token: await tokens.issue(user.id), user };
    },
    async login(username, password) {
      const found = await users.findCredentials(username);
      // One message for both cases, so sign-in does not reveal which usernames exist.
      if (!found || !(await verifyPassword(password, found.passwordHash))) {
        throw new DomainError(ErrorCode.UNAUTHENTICATED, "Username or password is wrong.");
      }
      return { token: await tokens.issue(found.user.id), user: found.user };
    },
  };
}
