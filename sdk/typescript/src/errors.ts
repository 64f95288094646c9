/** Typed errors: one class per way a call can fail. */

/** Fields every ArbiterError carries. */
export interface ErrorDetails {
  /** The HTTP status; 0 when no answer came. */
  status?: number;
  /** The server's machine-readable reason, when it sends one. */
  code?: string;
  /** The field a 400 is about, when the server names one. */
  field?: string;
  /** The answer's X-Request-Id. */
  requestId?: string;
  /** Seconds the server asked the caller to wait, when it did. */
  retryAfter?: number;
}

/** A call failed: `message` is the server's sentence. */
export class ArbiterError extends Error {
  readonly status: number;
  readonly code?: string;
  readonly field?: string;
  readonly requestId?: string;
  readonly retryAfter?: number;

  constructor(message: string, details: ErrorDetails = {}) {
    super(message);
    this.name = new.target.name;
    this.status = details.status ?? 0;
    this.code = details.code;
    this.field = details.field;
    this.requestId = details.requestId;
    this.retryAfter = details.retryAfter;
  }
}

/** 400: the request is not valid; `field` names the field when known. */
export class BadRequest extends ArbiterError {}
/** 401: no key, or a malformed, unknown or revoked one. */
export class Unauthorized extends ArbiterError {}
/** 404: the task is unknown or another account's (not told apart). */
export class NotFound extends ArbiterError {}
/** 409: the idempotency key's first request is still being stored. */
export class Conflict extends ArbiterError {}
/** 413: the body is over the server's limit. */
export class PayloadTooLarge extends ArbiterError {}
/** 415: the body was not sent as JSON. */
export class UnsupportedMediaType extends ArbiterError {}
/** 422: the idempotency key was used for a different request. */
export class IdempotencyMismatch extends ArbiterError {}
/** 429: the daily cap or a per-client limit; `retryAfter` says when. */
export class RateLimited extends ArbiterError {}
/** 503: the server's store did not answer in time. */
export class Unavailable extends ArbiterError {}
/** Any other 5xx. */
export class ServerError extends ArbiterError {}
/** No answer came: the connection failed or the request timed out. */
export class APIConnectionError extends ArbiterError {}

const byStatus: Record<number, typeof ArbiterError> = {
  400: BadRequest,
  401: Unauthorized,
  404: NotFound,
  409: Conflict,
  413: PayloadTooLarge,
  415: UnsupportedMediaType,
  422: IdempotencyMismatch,
  429: RateLimited,
  503: Unavailable,
};

/** The typed error for an answer with this status and decoded body. */
export function errorFor(status: number, body: unknown, details: Omit<ErrorDetails, "status" | "code" | "field"> = {}): ArbiterError {
  let message = `the server answered HTTP ${status}`;
  let code: string | undefined;
  let field: string | undefined;
  if (body !== null && typeof body === "object") {
    const b = body as Record<string, unknown>;
    if (typeof b.error === "string" && b.error !== "") message = b.error;
    if (typeof b.code === "string") code = b.code;
    if (typeof b.field === "string") field = b.field;
  }
  const Cls = byStatus[status] ?? (status >= 500 ? ServerError : ArbiterError);
  return new Cls(message, { ...details, status, code, field });
}
