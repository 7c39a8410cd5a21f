/**
 * The portal's entries in the OpenAPI registry (src/http/openapi/registry.ts
 * spreads them in): every page and the static files, so the document lists
 * everything the daemon serves and the suite's contract check covers the
 * portal's answers too. One section per part of the portal.
 */
import type { z } from 'zod';
import type { Answer, Endpoint } from '../http/openapi/registry.js';
import { ErrorBody } from '../http/openapi/schemas.js';

// (Type-only imports from the registry: it imports this file, and a value import back would be a cycle.)
export const page = (description: string): Answer => ({ description, content: { 'text/html': 'text' } });
export const json = (schema: z.ZodType, description: string): Answer => ({ description, content: { 'application/json': schema } });
export const error = (description: string): Answer => json(ErrorBody, description);
const asset = (description: string): Answer => ({ description, content: { 'text/javascript': 'text', 'text/css': 'text', 'image/svg+xml': 'text' } });

// --- static files (src/web/static.ts)
const STATIC: Endpoint[] = [
  {
    method: 'get',
    path: '/static/{file}',
    summary: "The portal's client scripts and style sheet",
    description: 'A fixed set of files shipped with the daemon; any other name is a 404.',
    tag: 'web',
    auth: 'none',
    params: { file: 'A file name, e.g. `api.js`, `portal.css`.' },
    responses: { 200: asset('The file.'), 404: error('No such file.') },
  },
];

// --- sign-in and the front door

// --- results list and job page

// --- result page

// --- live view, web remote, reference images

export const PORTAL_ENDPOINTS: Endpoint[] = [...STATIC];
