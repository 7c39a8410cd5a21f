/**
 * The node's audit files (src/storage/auditLog.ts) and the role rule of `GET /api/v2/audit`: retention by an
 * injected clock, a torn last line (a crash mid-write) cut without losing an earlier entry, the CLI's file
 * beside the daemon's, and 403 for a caller whose role is below admin.
 */
import { expect } from 'chai';
import { appendFile, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Context } from 'koa';
import { parseAuditQuery, type NewAuditEntry } from '../../src/core/audit.js';
import { isFarmError } from '../../src/core/errors.js';
import { requireAuditReader } from '../../src/http/audit.js';
import { appendAuditEntry, FileAuditLog } from '../../src/storage/auditLog.js';

const DAY = 86_400_000;
const entry = (at: number, action: NewAuditEntry['action'] = 'job.run', who = 'alice'): NewAuditEntry => ({
  at: new Date(at).toISOString(),
  who,
  via: 'token',
  token_id: '1a2b3c4d',
  from: '192.0.2.7',
  action,
  node: 'n1',
  target: null,
  detail: {},
  outcome: 200,
});
const all = (log: FileAuditLog) => log.query(parseAuditQuery({ limit: '1000' }, () => true));

describe('audit files on a node', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'farmhand-audit-'));
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  it('keeps audit.keep_days days: older day files are deleted at open and by the sweep, as the clock moves on', async () => {
    let now = Date.parse('2026-03-10T12:00:00Z');
    const log = await FileAuditLog.open({ dataDir: dir, keepDays: 2, now: () => now });
    log.record(entry(Date.parse('2026-03-07T10:00:00Z')));
    log.record(entry(Date.parse('2026-03-08T10:00:00Z')));
    log.record(entry(Date.parse('2026-03-10T10:00:00Z')));
    appendAuditEntry(dir, entry(Date.parse('2026-03-07T11:00:00Z'), 'token.create', 'cli'));
    await log.flush();
    expect(await readdir(path.join(dir, 'audit'))).to.have.members(['2026-03-07.jsonl', '2026-03-07.cli.jsonl', '2026-03-08.jsonl', '2026-03-10.jsonl']);
    expect(await log.sweep()).to.have.members(['2026-03-07.jsonl', '2026-03-07.cli.jsonl']);
    now += DAY;
    expect(await log.sweep()).to.deep.equal(['2026-03-08.jsonl']);
    expect((await all(log)).entries).to.have.length(1);
    await log.close();
    // And at open: a daemon started after a long stop deletes what is past the limit before it writes.
    now += 10 * DAY;
    const again = await FileAuditLog.open({ dataDir: dir, keepDays: 2, now: () => now });
    expect(await readdir(path.join(dir, 'audit'))).to.deep.equal(['2026-03-21.jsonl']);
    await again.close();
  });

  it('a crash in the middle of a write: the torn last line is cut at the next open, and no earlier entry is lost', async () => {
    const t = Date.parse('2026-03-10T12:00:00Z');
    const log = await FileAuditLog.open({ dataDir: dir, keepDays: 90, now: () => t });
    for (let i = 0; i < 3; i++) log.record(entry(t + i));
    await log.close();
    const file = path.join(dir, 'audit', '2026-03-10.jsonl');
    // What a write cut short leaves: the start of a line, no newline.
    await appendFile(file, '{"id":"1773144000003-0a0b0c0d","at":"2026-03-10T12:0');
    const next = await FileAuditLog.open({ dataDir: dir, keepDays: 90, now: () => t + 10 });
    next.record(entry(t + 10, 'job.stop'));
    await next.flush();
    const lines = (await readFile(file, 'utf8')).split('\n');
    expect(lines.at(-1)).to.equal('');
    expect(lines.slice(0, -1).map((l) => (JSON.parse(l) as { action: string }).action)).to.deep.equal(['job.run', 'job.run', 'job.run', 'job.stop']);
    expect((await all(next)).entries.map((e) => e.action)).to.deep.equal(['job.stop', 'job.run', 'job.run', 'job.run']);
    await next.close();
  });

  it("the CLI cuts a torn line of its own file too, and the daemon's query merges both files, newest first", async () => {
    const t = Date.parse('2026-03-10T12:00:00Z');
    appendAuditEntry(dir, entry(t, 'token.create', 'cli'));
    await appendFile(path.join(dir, 'audit', '2026-03-10.cli.jsonl'), '{"id":"17731');
    appendAuditEntry(dir, entry(t + 2, 'token.revoke', 'cli'));
    const log = await FileAuditLog.open({ dataDir: dir, keepDays: 90, now: () => t });
    log.record(entry(t + 1));
    expect((await all(log)).entries.map((e) => e.action)).to.deep.equal(['token.revoke', 'job.run', 'token.create']);
    await log.close();
  });

  it('a line that is not an entry (a foreign file, a hand edit) is skipped, not an error', async () => {
    await writeFile(path.join(dir, 'audit-placeholder'), '');
    const log = await FileAuditLog.open({ dataDir: dir, keepDays: 90, now: () => Date.parse('2026-03-10T12:00:00Z') });
    await appendFile(path.join(dir, 'audit', '2026-03-10.jsonl'), 'not json\n{"id":"x"}\n');
    log.record(entry(Date.parse('2026-03-10T12:00:01Z')));
    expect((await all(log)).entries).to.have.length(1);
    await log.close();
  });
});

describe('who may read the audit trail', () => {
  const ctx = (user?: { login: string; tokenId: string; role?: 'read' | 'manual' | 'run' | 'admin' }) => ({ state: { user } }) as unknown as Context;
  const refusal = (c: Context): string | undefined => {
    try {
      requireAuditReader(c);
      return undefined;
    } catch (e) {
      expect(isFarmError(e) && e.code).to.equal('forbidden');
      return (e as Error).message;
    }
  };

  it('admin, and a user without a role (no roles configured), may; read, manual and run get 403 naming their role', () => {
    expect(refusal(ctx({ login: 'a', tokenId: '1', role: 'admin' }))).to.equal(undefined);
    expect(refusal(ctx({ login: 'a', tokenId: '1' }))).to.equal(undefined);
    for (const role of ['read', 'manual', 'run'] as const) expect(refusal(ctx({ login: 'a', tokenId: '1', role }))).to.equal(`${role} may not read the audit trail`);
    expect(refusal(ctx())).to.match(/administrators/);
  });
});
