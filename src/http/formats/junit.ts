/**
 * GET /api/v2/results.xml: the results list in the jUnit XML format that
 * Jenkins, GitLab and Bamboo read, shaped after Apache Ant's schema (one
 * `<testsuite>` root). The element mapping is documented in
 * docs/results-formats.md; records arrive filtered, sorted and capped.
 */
import { kindOfRecord } from '../../core/infrastructure.js';
import type { ResultRecord } from '../../core/model.js';
import { parseJobUid } from '../../core/ids.js';
import { seconds } from './csv.js';
import { xmlAttr, xmlText } from './text.js';
import { instant, ZoneFormatter } from './zone.js';

/** How to render the suite. */
export interface JunitOptions {
  /** true: timestamps carry their offset (`2026-11-23T10:19:15+01:00`); false: local time only, as the Ant schema wants. */
  includeTz: boolean;
  /** IANA zone the timestamps are local to. */
  tz: string;
  /** The suite's timestamp when there are no results (defaults to now). */
  now?: Date;
  /** How `classname` is written (default `path`); see {@link junitNames}. */
  classname?: JunitClassname;
}

/**
 * `path`: the test file as written (`tests/ui/menus.py`), as the stb-tester
 * portal's own jUnit does, so a team moving from it keeps its Jenkins history.
 * `pytest`: dotted module without `.py` (`tests.ui.menus`), as pytest's junitxml.
 */
export type JunitClassname = 'path' | 'pytest';
export const JUNIT_CLASSNAMES: readonly JunitClassname[] = ['path', 'pytest'];

/**
 * The XML form's own query parameters (`include_tz`, `junit_classname`), as the route's query schema
 * accepted them (src/http/openapi/schemas.ts `JunitQuery`: a 400 naming the parameter before this runs);
 * the node and the farm portal answer results.xml with the same rules.
 */
export function junitQueryOptions(query: { include_tz?: 'true' | 'false'; junit_classname?: JunitClassname }): { includeTz: boolean; classname: JunitClassname } {
  return { includeTz: query.include_tz === 'true', classname: query.junit_classname ?? 'path' };
}

/** `tests/ui/menus.py::test_ok` -> classname `tests/ui/menus.py` (or `tests.ui.menus` in pytest style), name `test_ok`. */
export function junitNames(testCase: string, style: JunitClassname = 'path'): { classname: string; name: string } {
  const at = testCase.lastIndexOf('::');
  if (at < 0) return { classname: '', name: testCase };
  const file = testCase.slice(0, at);
  const classname = style === 'pytest' ? file.replace(/\.py$/, '').replace(/[/\\]/g, '.') : file;
  return { classname, name: testCase.slice(at + 2) };
}

/**
 * The exception type that starts a failure reason (`AssertionError: ...`), else a generic one per outcome;
 * an infrastructure error gives `InfrastructureError.<kind>` so CI can tell the rig's faults from the product's.
 */
export function exceptionType(r: Pick<ResultRecord, 'result' | 'failure_reason' | 'infrastructure_error'>): string {
  const kind = r.result === 'error' ? kindOfRecord(r) : null;
  if (kind) return `InfrastructureError.${kind}`;
  const m = /^([A-Za-z_][\w.]*):/.exec(r.failure_reason ?? '');
  if (m) return m[1]!;
  return r.result === 'error' ? 'Error' : 'Failure';
}

/**
 * The jUnit XML document for a list of results: one `<testsuite>` with one
 * `<testcase>` per result, `<failure>` for `fail`, `<error>` for `error`.
 * @throws FarmError `invalid_request` for an unknown `tz`.
 */
export function resultsJunitXml(records: readonly ResultRecord[], opts: JunitOptions): string {
  const zone = new ZoneFormatter(opts.tz);
  const stamp = (ts: number) => zone.iso(ts, { ms: false, offset: opts.includeTz });
  const starts = records.map((r) => instant(r.start_time)).filter((t) => !Number.isNaN(t));
  const first = starts.length > 0 ? Math.min(...starts) : (opts.now ?? new Date()).getTime();
  const count = (o: ResultRecord['result']) => records.filter((r) => r.result === o).length;
  const total = records.reduce((sum, r) => sum + r.duration, 0);

  const out: string[] = ['<?xml version="1.0" encoding="UTF-8"?>\n'];
  out.push(
    `<testsuite name="${xmlAttr(suiteName(records))}" tests="${records.length}" failures="${count('fail')}"` +
      ` errors="${count('error')}" skipped="0" time="${seconds(total)}" timestamp="${stamp(first)}"` +
      ` hostname="${xmlAttr(hostname(records))}">\n`,
  );
  out.push('  <properties>\n');
  for (const [name, value] of commonProperties(records)) {
    out.push(`    <property name="${xmlAttr(name)}" value="${xmlAttr(value)}"/>\n`);
  }
  out.push('  </properties>\n');
  for (const r of records) out.push(testcase(r, opts.classname ?? 'path'));
  const listing = records.map((r) => {
    const ts = instant(r.start_time);
    return `${Number.isNaN(ts) ? r.start_time : stamp(ts)} ${r.result} ${r.test_case} ${r.result_id}\n`;
  });
  out.push(`  <system-out>${xmlText(listing.join(''))}</system-out>\n`);
  out.push('  <system-err></system-err>\n</testsuite>\n');
  return out.join('');
}

function testcase(r: ResultRecord, style: JunitClassname): string {
  const { classname, name } = junitNames(r.test_case, style);
  const open = `  <testcase classname="${xmlAttr(classname)}" name="${xmlAttr(name)}" time="${seconds(r.duration)}"`;
  if (r.result === 'pass') return `${open}/>\n`;
  const tag = r.result === 'fail' ? 'failure' : 'error';
  const message = r.failure_reason ?? '';
  const body = r.traceback ?? message;
  return (
    `${open}>\n    <${tag} message="${xmlAttr(message)}" type="${xmlAttr(exceptionType(r))}">` +
    `${xmlText(body)}</${tag}>\n  </testcase>\n`
  );
}

/** The job_uid when every result comes from one job (the usual `filter=job:<uid>` call), else `farmhand`. */
function suiteName(records: readonly ResultRecord[]): string {
  const uid = records[0]?.job_uid;
  return uid !== undefined && records.every((r) => r.job_uid === uid) ? uid : 'farmhand';
}

/** The node that ran the tests (from job_uid); `localhost` when unknown or mixed, as the Ant schema asks. */
function hostname(records: readonly ResultRecord[]): string {
  const nodes = new Set(records.map((r) => parseJobUid(r.job_uid)?.nodeId ?? ''));
  const [only] = nodes;
  return nodes.size === 1 && only ? only : 'localhost';
}

/** Job fields and tags that every result shares: what the suite as a whole ran with. */
function commonProperties(records: readonly ResultRecord[]): Array<[string, string]> {
  const [head, ...rest] = records;
  if (!head) return [];
  const fields: Array<[string, string | null]> = [
    ['job_uid', head.job_uid],
    ['category', head.category],
    ['test_pack_sha', head.test_pack_sha],
    ['test_pack_branch', head.test_pack_branch],
    ['username', head.username],
    ...Object.entries(head.tags).map(([k, v]): [string, string] => [`tags.${k}`, v]),
  ];
  const valueIn = (r: ResultRecord, key: string): string | null | undefined =>
    key.startsWith('tags.') ? r.tags[key.slice(5)] : (r[key as keyof ResultRecord] as string | null);
  return fields.filter(
    (f): f is [string, string] => f[1] !== null && rest.every((r) => valueIn(r, f[0]) === f[1]),
  );
}
