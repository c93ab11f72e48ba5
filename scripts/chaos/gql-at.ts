// A GraphQL request as a client behind a proxy makes it (its address in
// X-Forwarded-For), answered with what a client sees: the HTTP status,
// Retry-After, the data and the errors' codes. A transport failure is an error too.

export interface GqlAnswer<T> {
  /** 0 when no HTTP answer came. */
  readonly status: number;
  readonly retryAfter: string | null;
  readonly data: T | null;
  /** Each error's code, or what failed in transport. */
  readonly errors: readonly string[];
}

export async function gqlAt<T>(
  url: string,
  query: string,
  variables: Record<string, unknown>,
  options: { readonly token?: string; readonly forwardedFor?: string; readonly timeoutMs?: number } = {},
): Promise<GqlAnswer<T>> {
  try {
    const response = await fetch(url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
        ...(options.forwardedFor ? { "x-forwarded-for": options.forwardedFor } : {}),
      },
      body: JSON.stringify({ query, variables }),
      signal: AbortSignal.timeout(options.timeoutMs ?? 10_000),
    });
    const body = (await response.json()) as { data?: T | null; errors?: { extensions?: { code?: string } }[] };
    return {
      status: response.status,
      retryAfter: response.headers.get("retry-after"),
      data: body.data ?? null,
      errors: (body.errors ?? []).map((e) => e.extensions?.code ?? "no code"),
    };
  } catch (error) {
    return { status: 0, retryAfter: null, data: null, errors: [(error as { cause?: { code?: string } }).cause?.code ?? (error as Error).name] };
  }
}
