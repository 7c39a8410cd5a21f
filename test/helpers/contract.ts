/**
 * The suite's check that the server keeps to its OpenAPI document: every
 * response a test receives through these helpers is matched against the
 * document (path + method documented, status documented for it, content type
 * documented for that status, JSON body valid against the schema, with ajv's
 * 2020-12 dialect). A mismatch is recorded, not thrown, so the test's own
 * assertions still run; the root hook (test/helpers/contractHooks.ts) fails
 * the test during which one was recorded.
 *
 * Rules for what the registry does not list per path (docs/openapi.md): an
 * unknown path or an unserved method answers a 4xx or 501 error body; OPTIONS
 * answers 200 or 204 without a body; HEAD is checked as GET without a body.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import request from 'supertest';
import { buildDocument } from '../../src/http/openapi/document.js';

type Json = Record<string, unknown>;

export interface SeenResponse {
  method: string;
  /** The request path; a query string is ignored. */
  path: string;
  status: number;
  /** The Content-Type header, if any. */
  contentType: string | undefined;
  /** The body: parsed JSON for JSON answers, else text or bytes; undefined or empty when there was none. */
  body: unknown;
  /** Bytes of body received (0: none). */
  length: number;
}

interface Operation {
  responses: Record<string, { content?: Record<string, { schema: Json }> }>;
}

interface Route {
  template: string;
  regex: RegExp;
  literal: number;
  ops: Record<string, Operation>;
}

export class ContractChecker {
  private readonly routes: Route[];
  private readonly ajv: Ajv2020;
  private readonly validators = new Map<string, ValidateFunction>();
  private readonly errorValidator: ValidateFunction;

  constructor(readonly doc: Json) {
    const paths = doc.paths as Record<string, Record<string, Operation & { parameters?: Array<{ name: string; 'x-multi-segment'?: boolean }> }>>;
    this.routes = Object.entries(paths).map(([template, item]) => {
      const multi = new Set(Object.values(item).flatMap((op) => (op.parameters ?? []).filter((p) => p['x-multi-segment']).map((p) => p.name)));
      const source = template
        .split(/(\{[^}]+\})/)
        .map((part) => {
          const m = /^\{(.+)\}$/.exec(part);
          if (!m) return part.replace(/[.*+?^$()|[\]\\]/g, '\\$&');
          return multi.has(m[1]!) ? '(.+)' : '([^/]+)';
        })
        .join('');
      // The router matches case-insensitively; a trailing slash is folded before routing.
      return { template, regex: new RegExp(`^${source}$`, 'i'), literal: template.replace(/\{[^}]+\}/g, '').length, ops: item };
    });
    this.ajv = new Ajv2020({ strict: false, allErrors: false, validateFormats: false });
    const components = (doc.components as { schemas: Record<string, Json> }).schemas;
    this.ajv.addSchema({ $id: 'urn:farmhand:components', $defs: rebase(components) as Json });
    this.errorValidator = this.ajv.compile(rebase({ $ref: '#/components/schemas/Error' }) as Json);
  }

  /** What is wrong with a response, or undefined when it conforms. */
  check(r: SeenResponse): string | undefined {
    const path = fold(r.path.split('?')[0]!);
    const method = r.method.toLowerCase();
    const where = `${r.method.toUpperCase()} ${path} -> ${r.status}`;
    const route = this.match(path);
    const op = route?.ops[method === 'head' ? 'get' : method];
    if (method === 'options' && (r.status === 200 || r.status === 204) && r.length === 0) return undefined;
    if (!route || !op) {
      // Not a documented operation: only an error answer is allowed.
      if (!((r.status >= 400 && r.status < 500) || r.status === 501)) {
        return `${where}: ${route ? `method not documented for ${route.template}` : 'path not documented'}, and the answer is not an error`;
      }
      return method === 'head' ? undefined : this.checkJson(where, this.errorValidator, r);
    }
    const answer = op.responses[String(r.status)];
    if (!answer) return `${where}: status ${r.status} is not documented for ${method} ${route.template} (documented: ${Object.keys(op.responses).join(', ')})`;
    const documented = Object.keys(answer.content ?? {});
    if (documented.length === 0) {
      if (r.length > 0 || r.contentType) return `${where}: documented without a body, but the answer has ${r.contentType ?? 'a body'}`;
      return undefined;
    }
    const type = (r.contentType ?? '').split(';')[0]!.trim().toLowerCase();
    const media = documented.find((t) => t === type || t === '*/*');
    if (!media) return `${where}: content type ${JSON.stringify(r.contentType)} is not documented (documented: ${documented.join(', ')})`;
    if (method === 'head' || media !== 'application/json') return undefined;
    return this.checkJson(where, this.validator(`${route.template} ${method} ${r.status}`, answer.content![media]!.schema), r);
  }

  private match(path: string): Route | undefined {
    const found = this.routes.filter((x) => x.regex.test(path));
    return found.sort((a, b) => b.literal - a.literal)[0];
  }

  private validator(key: string, schema: Json): ValidateFunction {
    let v = this.validators.get(key);
    if (!v) {
      v = this.ajv.compile(rebase(schema) as Json);
      this.validators.set(key, v);
    }
    return v;
  }

  private checkJson(where: string, validate: ValidateFunction, r: SeenResponse): string | undefined {
    let body = r.body;
    if (Buffer.isBuffer(r.body) || typeof r.body === 'string') {
      const text = r.body.toString();
      try {
        body = JSON.parse(text);
      } catch {
        return `${where}: the body is not JSON (${JSON.stringify(text.slice(0, 80))})`;
      }
    }
    if (validate(body)) return undefined;
    const e = validate.errors?.[0];
    return `${where}: body does not match the schema: ${e?.instancePath || '(root)'} ${e?.message ?? ''} ${e?.params ? JSON.stringify(e.params) : ''} (schema ${e?.schemaPath ?? ''})`;
  }
}

/** `#/components/schemas/X` -> the components schema ajv knows. */
function rebase(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(rebase);
  if (v === null || typeof v !== 'object') return v;
  return Object.fromEntries(
    Object.entries(v).map(([k, x]) => [k, k === '$ref' && typeof x === 'string' ? x.replace('#/components/schemas/', 'urn:farmhand:components#/$defs/') : rebase(x)]),
  );
}

const fold = (p: string) => (p.length > 1 ? p.replace(/\/+$/, '') || '/' : p);

// --- the suite's one checker and its record of violations

let shared: ContractChecker | undefined;
export const contract = (): ContractChecker => (shared ??= new ContractChecker(buildDocument({ version: 'test' })));

const violations: string[] = [];

/** Check a response and remember a violation for the root hook. */
export function recordResponse(r: SeenResponse): void {
  const problem = contract().check(r);
  if (problem) violations.push(problem);
}

/** The violations recorded since the last call (and forget them). */
export const takeViolations = (): string[] => violations.splice(0);

/** Whether the contract check is on (FARMHAND_CONTRACT=off turns it off, e.g. to see a test's own failure first). */
export const contractCheckOn = (): boolean => process.env.FARMHAND_CONTRACT !== 'off';

type Agent = ReturnType<typeof request>;
const METHODS = new Set(['get', 'post', 'put', 'delete', 'head', 'patch', 'options']);

/** A response as superagent gives it, seen by the checker. */
function seen(method: string, url: string, res: { status: number; headers: Record<string, string | undefined>; body: unknown; text?: string }): SeenResponse {
  const contentType = res.headers['content-type'];
  const json = /^application\/([a-z.+-]*\+)?json/i.test(contentType ?? '');
  const length = Buffer.isBuffer(res.body) ? res.body.length : Number(res.headers['content-length'] ?? (res.text ?? '').length);
  return { method, path: new URL(url).pathname, status: res.status, contentType, body: json ? (res.text ?? res.body) : res.body, length };
}

/** A supertest client whose every response is checked against the document. */
export function checked<A extends Agent>(agent: A): A {
  return new Proxy(agent, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof prop !== 'string' || !METHODS.has(prop) || typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        const test = (value as (...a: unknown[]) => ReturnType<Agent['get']>).apply(target, args);
        test.on('response', (res: Parameters<typeof seen>[2]) => {
          if (contractCheckOn()) recordResponse(seen(prop.toUpperCase(), (test as unknown as { url: string }).url, res));
        });
        return test;
      };
    },
  });
}

/** `request(url)` with the contract check: for tests that call the daemon without the daemon helper. */
export const client = (url: string): Agent => checked(request(url));
