/**
 * The shape of one entry of the document's list of endpoints (registry.ts for the API, pages.ts for the
 * portal's pages), in a module of its own so that both lists can use it without importing each other.
 */
import type { z } from 'zod';

export type Method = 'get' | 'post' | 'put' | 'delete';

/** One content type of an answer: a zod schema for JSON, or the kind of bytes. */
export type Body = z.ZodType | 'text' | 'binary';

export interface Answer {
  description: string;
  /** Content type -> body; none for an answer without a body (204). */
  content?: Record<string, Body>;
}

export interface Endpoint {
  method: Method;
  /** OpenAPI path template. A parameter listed in MULTI_SEGMENT may span several segments. */
  path: string;
  summary: string;
  description?: string;
  /** Group on the reference page. */
  tag: 'v1' | 'v2' | 'v2 nodes' | 'results' | 'web' | 'extras' | 'meta';
  /** Who must send a token: every v2 call; v1 and the web pages only with `auth.v1_requires_token`; nobody. */
  auth: 'token' | 'v1' | 'none';
  /** Path parameter descriptions, by name as in `path`. */
  params?: Record<string, string>;
  query?: z.ZodObject;
  body?: z.ZodType;
  responses: Record<number, Answer>;
  /** false: not counted by the rate limiter (long polls). */
  rateLimited?: boolean;
}

/** Path parameters that match the rest of the path, slashes included (branch names, artifact paths). */
export const MULTI_SEGMENT = new Set(['test_pack_revision', 'artifact_path']);
