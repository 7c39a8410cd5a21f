/**
 * The portal's entries in the OpenAPI registry (src/http/openapi/registry.ts
 * spreads them in): every page and the static files, so the document lists
 * everything the daemon serves and the suite's contract check covers the
 * portal's answers too. One section per part of the portal.
 */
import { z } from 'zod';
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

// --- live view, web remote, reference images (src/web/pages/live.tsx)
const LIVE: Endpoint[] = [
  {
    method: 'get',
    path: '/app/live',
    summary: 'Live view and web remote',
    description:
      'The live picture of the device under test, the remote control built from the test pack\'s `config/remote-control/*.lircd.conf` ' +
      '(presses go to `POST /api/v2/nodes/{node_id}/press`), and reference images. Under the web pages\' rule (a token or a session only with `auth.v1_requires_token`).',
    tag: 'web',
    auth: 'v1',
    responses: { 200: page('The page.') },
  },
  {
    method: 'get',
    path: '/app/live/stream.mjpeg',
    summary: 'The live picture as Motion JPEG',
    description:
      'A `multipart/x-mixed-replace` stream that stays open: one JPEG part per preview frame (`capture.preview_fps`), each with ' +
      '`Content-Length` and `X-Frame-Seq`. An `<img>` shows it. A client that reads slowly skips frames; it never slows capture or other viewers.',
    tag: 'web',
    auth: 'v1',
    responses: {
      200: { description: 'The stream.', content: { 'multipart/x-mixed-replace': 'binary' } },
      503: error('No capture, or too many viewers (32); retry after Retry-After.'),
    },
  },
  {
    method: 'get',
    path: '/app/live/frame.png',
    summary: 'One captured frame as PNG, whole or a rectangle of it',
    description:
      'The exact pixels of the latest captured frame (lossless). With `x`, `y`, `width`, `height` (frame pixels) only that rectangle: ' +
      'a reference image for `wait_for_match`. With `name`, offered as a download `<name>.png`. `X-Frame-Seq` names the frame.',
    tag: 'web',
    auth: 'v1',
    query: z.object({
      name: z.string().optional().meta({ description: 'Download as `<name>.png` (letters, digits, `_ . -`).' }),
      x: z.string().optional().meta({ description: 'Left edge, pixels.' }),
      y: z.string().optional().meta({ description: 'Top edge, pixels.' }),
      width: z.string().optional().meta({ description: 'Width, pixels (at least 1).' }),
      height: z.string().optional().meta({ description: 'Height, pixels (at least 1).' }),
    }),
    responses: {
      200: { description: 'The PNG.', content: { 'image/png': 'binary' } },
      400: error('A bad name or a rectangle outside the frame.'),
      503: error('Capture is offline.'),
    },
  },
];

export const PORTAL_ENDPOINTS: Endpoint[] = [...STATIC, ...LIVE];
