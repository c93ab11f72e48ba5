// Refusing to start: the configuration, or what it points at, has to change
// before the service can run, so starting the process again would change nothing.

/** sysexits.h's EX_CONFIG: a process that refuses to start exits with it, and the supervisor does not start it again. */
export const refusalExitCode = 78;

/** The service cannot run as configured; the message says what to change. */
export class StartRefusal extends Error {
  override readonly name: string = "StartRefusal";
}
