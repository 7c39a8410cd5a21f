/**
 * The table's entries for operators and machines: probes, metrics, the OpenAPI document and the push webhook
 * (src/http/opsRoutes.ts, src/farm/portal/ops.ts, src/http/openapi/routes.ts, src/http/webhooks.ts; docs/operations.md).
 */
import { z } from 'zod';
import * as S from '../openapi/schemas.js';
import { e, error, json, none, text, type Endpoint } from './entry.js';

export const OPS: Endpoint[] = [
  {
    ...e('GET', '/healthz', 'public', 'check health'),
    summary: 'Liveness: the process answers (constant cost)',
    tag: 'meta',
    auth: 'none',
    // A load balancer probes from one address: a 429 would take a healthy process out of service.
    rateLimited: false,
    responses: { 200: json(S.Health, 'The process is alive; `starting` while it starts.') },
  },
  {
    ...e('GET', '/readyz', 'public', 'check readiness'),
    summary: 'Readiness: capture delivering frames, test pack reachable, data directory writable, disk above the floor',
    description:
      "On a farm portal (`farmhand portal`): the database answers and the portal holds the portal lock (one portal per database); a load balancer's health check (docs/farm.md).",
    tag: 'meta',
    auth: 'none',
    rateLimited: false,
    responses: { 200: json(S.Ready, 'Ready to run tests.'), 503: json(S.NotReady, 'Not ready: the failed checks and why.') },
  },
  {
    ...e('GET', '/metrics', 'read', 'read the metrics'),
    summary: 'Prometheus metrics (text exposition format 0.0.4)',
    description:
      "Readable like v1 (a token only with `auth.v1_requires_token`). The series are listed in docs/operations.md; a farm portal's (`farmhand_portal_*`) in docs/farm.md.",
    tag: 'meta',
    auth: 'v1',
    responses: { 200: text('text/plain', 'The exposition.') },
  },
  {
    ...e('GET', '/api/openapi.json', 'public', 'read the API document', 'node'),
    summary: 'This OpenAPI document',
    tag: 'meta',
    auth: 'none',
    responses: { 200: { description: 'The OpenAPI 3.1 document.', content: { 'application/json': z.looseObject({ openapi: z.string() }) } } },
  },
  {
    // COMPAT: a git host's push webhook carries no token.
    ...e('POST', '/github/post-receive', 'public', 'announce a push'),
    audit: 'testpack.fetch',
    summary: 'Push webhook: fetch the test pack now',
    description: 'No body and no token needed (the sender is a git host).',
    tag: 'extras',
    auth: 'none',
    responses: { 204: none('Fetched.'), 503: error('The test-pack repository could not be fetched.') },
  },
];
