/**
 * The one error class of the domain. Every failure a client can cause or
 * should know about carries a snake_case code; the HTTP layer maps codes to
 * statuses and writes `{"error": code, "message": message}`. Callers and tests
 * check the code, never the message.
 */
export type ErrorCode =
  | 'invalid_request' // 400
  | 'invalid_filter' // 400
  | 'forbidden' // 403
  | 'not_found' // 404
  | 'conflict' // 409
  | 'gone' // 410
  | 'payload_too_large' // 413
  | 'unsupported_media_type' // 415
  | 'range_not_satisfiable' // 416
  | 'rate_limited' // 429
  | 'device_unavailable' // 503
  | 'database_unavailable' // 503 (the farm portal: PostgreSQL cannot be reached now)
  | 'storage_full' // 507
  | 'internal'; // 500

export class FarmError extends Error {
  override readonly name = 'FarmError';
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }
}

export const isFarmError = (e: unknown): e is FarmError => e instanceof FarmError;

/** Shorthands for the common cases. */
export const invalid = (message: string, details?: Record<string, unknown>) =>
  new FarmError('invalid_request', message, details);
export const notFound = (message: string) => new FarmError('not_found', message);
