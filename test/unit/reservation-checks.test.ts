/**
 * The reservation requests are checked by the table of endpoints' schemas (`check` on a node, `portalCheck`
 * on the farm portal), which replaced the hand validators of core/reservations.ts, farm/reservations.ts and
 * core/ids.ts (issue 21, item 1). This test keeps those hand validators, copied as they were before the move,
 * and requires the schemas to give the same answer (accepted, or 400 with the same message) on a corpus of
 * bodies and ids: every field's good, bad and edge values alone and in pairs, and non-object bodies.
 */
import { expect } from 'chai';
import { FarmError } from '../../src/core/errors.js';
import { DEFAULT_LIMITS, MAX_WAIT_SECS } from '../../src/core/reservations.js';
import { endpointOf } from '../../src/http/endpoints/table.js';
import { validateRequest, type RequestParts } from '../../src/http/endpoints/validate.js';
import type { Checks } from '../../src/http/endpoints/entry.js';
import { reserveRequestOf } from '../../src/farm/reservationRoutes.js';
import type { ReserveBody } from '../../src/http/openapi/schemas.js';

// ---------------------------------------------------------------- the hand validators, as they were

const invalid = (m: string) => new FarmError('invalid_request', m);
const L = DEFAULT_LIMITS;

function oldId(text: string): number {
  if (!/^[1-9][0-9]{0,14}$/.test(text)) throw invalid(`reservation id must be a positive integer, not ${JSON.stringify(text)}`);
  return Number(text);
}

function oldLength(message: string): void {
  if (message.length > L.maxMessageChars) throw invalid(`message: at most ${L.maxMessageChars} characters`);
}

function oldDuration(v: unknown, optional: boolean): number | null {
  if (optional && (v === undefined || v === null)) return null;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > L.maxDurationSecs) {
    throw invalid(`duration_secs must be a whole number of seconds from 1 to ${L.maxDurationSecs}${optional ? ', or null for no expiry' : ''}`);
  }
  return v;
}

function oldSecs(name: string, v: unknown, max: number, optional: boolean): number | null {
  if (optional && (v === undefined || v === null)) return null;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > max) {
    throw invalid(`${name} must be a whole number of seconds from 1 to ${max}${optional ? ', or null' : ''}`);
  }
  return v;
}

/** core/reservations.ts checkReserve (the node). */
function oldNodeReserve(body: unknown) {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw invalid('the body must be a JSON object with node_ids and message');
  const b = body as Record<string, unknown>;
  const ids = b['node_ids'];
  if (!Array.isArray(ids) || ids.length === 0 || !ids.every((n) => typeof n === 'string' && n !== '')) {
    throw invalid('node_ids must be a non-empty array of node id strings');
  }
  if (ids.length > L.maxNodes) throw invalid(`node_ids: at most ${L.maxNodes} nodes in one request`);
  const dup = (ids as string[]).find((n, i) => ids.indexOf(n) !== i);
  if (dup !== undefined) throw invalid(`node_ids: ${String(dup)} is listed twice`);
  const message = b['message'];
  if (typeof message !== 'string') throw invalid('message is required: a string shown to other users while the reservation is active');
  oldLength(message);
  return { nodeIds: ids as string[], message, durationSecs: oldDuration(b['duration_secs'], true) };
}

/** farm/reservations.ts parseReserveBody (the portal): the node's rules and the extensions. */
function oldFarmReserve(body: unknown, username: string) {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw invalid('the body must be a JSON object with node_ids and message');
  const b = body as Record<string, unknown>;
  const ids: unknown = b['node_ids'];
  if (!Array.isArray(ids) || ids.length === 0 || !ids.every((n) => typeof n === 'string' && n !== '')) {
    throw invalid('node_ids must be a non-empty array of node id strings');
  }
  if (ids.length > L.maxNodes) throw invalid(`node_ids: at most ${L.maxNodes} nodes in one request`);
  const dup = (ids as string[]).find((n, i) => ids.indexOf(n) !== i);
  if (dup !== undefined) throw invalid(`node_ids: ${dup} is listed twice`);
  const message: unknown = b['message'];
  if (typeof message !== 'string') throw invalid('message is required: a string shown to other users while the reservation is active');
  oldLength(message);
  return {
    node_ids: ids as string[],
    message,
    duration_secs: oldDuration(b['duration_secs'], true),
    username,
    lease_secs: oldSecs('lease_secs', b['lease_secs'], L.maxDurationSecs, true),
    wait_secs: oldSecs('wait_secs', b['wait_secs'], MAX_WAIT_SECS, true),
  };
}

/** The extend routes: the id, then `body?.duration_secs` (node and farm alike). */
function oldExtend(id: string, body: unknown): void {
  oldId(id);
  oldDuration((body as { duration_secs?: unknown } | null)?.duration_secs, false);
}

/** The interrupt routes: the id, then the message (node and farm alike). */
function oldInterrupt(id: string, body: unknown): void {
  oldId(id);
  const message = (body as { message?: unknown } | null)?.message;
  if (typeof message !== 'string' || message.trim() === '') {
    throw invalid('message is required: a non-empty string telling the owner why their reservation was interrupted');
  }
  oldLength(message);
}

// ---------------------------------------------------------------- the corpus

const LONG = 'x'.repeat(L.maxMessageChars);
const ids = (n: number) => Array.from({ length: n }, (_, i) => `node-${i}`);
const NOT_OBJECTS: unknown[] = [null, [], [{ node_ids: ['a'], message: 'm' }], 'x', '', 0, 5, true, false];

const NODE_IDS: unknown[] = [
  ['a'], ['a', 'b'], ids(L.maxNodes), ids(L.maxNodes + 1), [...ids(L.maxNodes), 'node-0'], [], 'a', '', [''], ['a', ''], [3], ['a', 3], [null], [['a']],
  ['a', 'a'], ['a', 'b', 'a', 'b'], ['b', 'a', 'a'], ['a', 'b', 'b', 'a'], [{}], null, undefined, 5, {}, [' '], ['ü'], ['a/b'], ['__proto__'], ['constructor', 'constructor'],
];
const MESSAGES: unknown[] = ['m', '', ' ', '  \t', '\u00a0', '\ufeff', '\n', LONG, `${LONG}x`, ` ${LONG}`, 'a'.repeat(L.maxMessageChars - 1) + '😀', undefined, null, 3, true, [], ['m'], {}];
const SECS = (max: number): unknown[] => [undefined, null, 1, 2, 60, max, max + 1, max - 1, 0, -1, -0, 1.5, 0.5, '60', '', true, false, [], [60], {}, 2 ** 53, 2 ** 53 + 2, 1e300, -1e300, Number.MAX_SAFE_INTEGER];

function reserveBodies(): unknown[] {
  const base = { node_ids: ['a'], message: 'm' };
  const out: unknown[] = [...NOT_OBJECTS, {}, base];
  const fields: Array<[string, unknown[]]> = [
    ['node_ids', NODE_IDS],
    ['message', MESSAGES],
    ['duration_secs', SECS(L.maxDurationSecs)],
    ['lease_secs', SECS(L.maxDurationSecs)],
    ['wait_secs', SECS(MAX_WAIT_SECS)],
  ];
  const withField = (b: Record<string, unknown>, k: string, v: unknown) => {
    const c = { ...b };
    if (v === undefined) delete c[k];
    else c[k] = v;
    return c;
  };
  // Each field alone, the others good.
  for (const [k, vs] of fields) for (const v of vs) out.push(withField(base, k, v));
  // Pairs of fields: which problem is answered first.
  for (let i = 0; i < fields.length; i++) {
    for (let j = i + 1; j < fields.length; j++) {
      const [ki, vi] = fields[i]!;
      const [kj, vj] = fields[j]!;
      for (const a of vi) for (const b of vj) out.push(withField(withField(base, ki, a), kj, b));
    }
  }
  // Unknown fields are ignored.
  out.push({ ...base, extra: 1 }, { ...base, node_id: 'x' });
  return out;
}

const ID_TEXTS = ['1', '2', '42', '999999999999999', '1000000000000000', '0', '00', '01', '-1', '+1', '1.5', '1e3', '0x10', 'abc', '', ' 1', '1 ', '1\n', '١', '%31', 'null', '9'.repeat(15), '9'.repeat(16)];

function extendBodies(): unknown[] {
  return [...NOT_OBJECTS, {}, ...SECS(L.maxDurationSecs).map((d) => (d === undefined ? {} : { duration_secs: d })), { duration_secs: 60, extra: 1 }];
}

function interruptBodies(): unknown[] {
  return [...NOT_OBJECTS, {}, ...MESSAGES.map((m) => (m === undefined ? {} : { message: m })), { message: 'why', extra: 1 }];
}

// ---------------------------------------------------------------- comparing

type Outcome = { ok: true; value?: unknown } | { ok: false; code: string; message: string };

function outcome(fn: () => unknown): Outcome {
  try {
    return { ok: true, value: fn() };
  } catch (e) {
    if (!(e instanceof FarmError)) throw e;
    return { ok: false, code: e.code, message: e.message };
  }
}

const checksOf = (method: string, path: string, side: 'node' | 'portal'): Checks => {
  const e = endpointOf(method, path)!;
  const c = side === 'node' ? e.check : e.portalCheck;
  expect(c, `${method} ${path} has a ${side} check`).to.not.equal(undefined);
  return c!;
};

/** The new code's answer: the entry's checks, as bound in front of the route (params, query, body). */
const viaSchema = (checks: Checks, parts: RequestParts) => outcome(() => validateRequest(checks, parts));

const strip = (o: Outcome): Outcome => (o.ok ? { ok: true } : o);

/** Compare and collect the differences (at most a few shown). */
function compare(cases: Array<{ what: unknown; old: Outcome; now: Outcome }>): { compared: number; differences: unknown[] } {
  const differences = cases.filter((c) => JSON.stringify(strip(c.old)) !== JSON.stringify(strip(c.now))).map((c) => ({ what: JSON.stringify(c.what)?.slice(0, 200), old: c.old, now: c.now }));
  return { compared: cases.length, differences };
}

describe('reservation requests: the table\'s schemas answer as the hand validators did (issue 21, item 1)', () => {
  const figures: string[] = [];
  after(() => {
    // The equivalence figures docs/openapi.md quotes.
    if (process.env.FARMHAND_FIGURES) console.log(figures.join('\n'));
  });

  it('POST /api/v2/reservations on a node: same acceptance and same first message', () => {
    const checks = checksOf('POST', '/api/v2/reservations', 'node');
    const r = compare(reserveBodies().map((b) => ({ what: b, old: outcome(() => oldNodeReserve(b)), now: viaSchema(checks, { body: b }) })));
    figures.push(`node reserve: ${r.compared} bodies, ${r.differences.length} differences`);
    expect(r.differences.slice(0, 5)).to.deep.equal([]);
    expect(r.compared).to.be.above(3000);
  });

  it('POST /api/v2/reservations on the portal: same acceptance, same first message, and the same request for the service', () => {
    const checks = checksOf('POST', '/api/v2/reservations', 'portal');
    const cases = reserveBodies().map((b) => {
      const old = outcome(() => oldFarmReserve(b, 'alice'));
      const now = viaSchema(checks, { body: b });
      return { what: b, old, now: now.ok ? outcome(() => reserveRequestOf(b as ReserveBody, 'alice')) : now };
    });
    const r = compare(cases);
    figures.push(`farm reserve: ${r.compared} bodies, ${r.differences.length} differences`);
    expect(r.differences.slice(0, 5)).to.deep.equal([]);
    // What the service is given for an accepted body is what the old parser gave it.
    const accepted = cases.filter((c) => c.old.ok && c.now.ok);
    expect(accepted.length).to.be.above(100);
    for (const c of accepted) expect((c.now as { value: unknown }).value, JSON.stringify(c.what).slice(0, 100)).to.deep.equal((c.old as { value: unknown }).value);
  });

  it('the node and the farm still differ where they did: the farm checks lease_secs and wait_secs, a node ignores them', () => {
    const body = { node_ids: ['a'], message: 'm', lease_secs: 0, wait_secs: MAX_WAIT_SECS + 1 };
    expect(viaSchema(checksOf('POST', '/api/v2/reservations', 'node'), { body })).to.deep.equal({ ok: true, value: undefined });
    expect(viaSchema(checksOf('POST', '/api/v2/reservations', 'portal'), { body })).to.deep.equal({
      ok: false,
      code: 'invalid_request',
      message: `lease_secs must be a whole number of seconds from 1 to ${L.maxDurationSecs}, or null`,
    });
  });

  for (const side of ['node', 'portal'] as const) {
    it(`extend, end and interrupt on ${side === 'node' ? 'a node' : 'the portal'}: the id, then the body, as before`, () => {
      const extend = checksOf('POST', '/api/v2/reservations/:id/extend', side);
      const end = checksOf('DELETE', '/api/v2/reservations/:id', side);
      const interrupt = checksOf('POST', '/api/v2/reservations/:id/interrupt', side);
      const cases: Array<{ what: unknown; old: Outcome; now: Outcome }> = [];
      for (const id of ID_TEXTS) {
        cases.push({ what: ['end', id], old: outcome(() => oldId(id)), now: viaSchema(end, { params: { id } }) });
        for (const b of extendBodies()) cases.push({ what: ['extend', id, b], old: outcome(() => oldExtend(id, b)), now: viaSchema(extend, { params: { id }, body: b }) });
        for (const b of interruptBodies()) cases.push({ what: ['interrupt', id, b], old: outcome(() => oldInterrupt(id, b)), now: viaSchema(interrupt, { params: { id }, body: b }) });
      }
      const r = compare(cases);
      figures.push(`${side} extend/end/interrupt: ${r.compared} requests, ${r.differences.length} differences`);
      expect(r.differences.slice(0, 5)).to.deep.equal([]);
      expect(r.compared).to.be.above(1000);
    });
  }

  it('the corpus has every kind of answer: accepted, and each message of the old validators', () => {
    const messages = new Set<string>();
    for (const b of reserveBodies()) {
      const o = outcome(() => oldFarmReserve(b, 'alice'));
      messages.add(o.ok ? 'accepted' : o.message.replace(/node_ids: \S+ is listed twice/, 'node_ids: <id> is listed twice'));
    }
    for (const b of [...interruptBodies(), ...extendBodies()]) {
      for (const f of [oldExtend, oldInterrupt]) {
        const o = outcome(() => f('1', b));
        if (!o.ok) messages.add(o.message);
      }
    }
    const o = outcome(() => oldId('x'));
    if (!o.ok) messages.add(o.message);
    expect([...messages].sort()).to.deep.equal(
      [
        'accepted',
        'the body must be a JSON object with node_ids and message',
        'node_ids must be a non-empty array of node id strings',
        `node_ids: at most ${L.maxNodes} nodes in one request`,
        'node_ids: <id> is listed twice',
        'message is required: a string shown to other users while the reservation is active',
        `message: at most ${L.maxMessageChars} characters`,
        `duration_secs must be a whole number of seconds from 1 to ${L.maxDurationSecs}, or null for no expiry`,
        `duration_secs must be a whole number of seconds from 1 to ${L.maxDurationSecs}`,
        `lease_secs must be a whole number of seconds from 1 to ${L.maxDurationSecs}, or null`,
        `wait_secs must be a whole number of seconds from 1 to ${MAX_WAIT_SECS}, or null`,
        'message is required: a non-empty string telling the owner why their reservation was interrupted',
        'reservation id must be a positive integer, not "x"',
      ].sort(),
    );
  });
});
