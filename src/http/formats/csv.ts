/**
 * GET /api/v2/results.csv: the results list as RFC 4180 CSV for
 * spreadsheets and scripts. Columns and choices are documented in
 * docs/results-formats.md; the records arrive already filtered, sorted and
 * capped by the route.
 */
import { kindOfRecord } from '../../core/infrastructure.js';
import type { ResultRecord } from '../../core/model.js';
import { resultUrl, triageUrl } from '../presenters.js';
import { instant, ZoneFormatter } from './zone.js';

/** What every row needs besides the record. */
export interface CsvOptions {
  /** Absolute base URL of the API (`https://farm.example:8080`), no trailing slash. */
  base: string;
  /** IANA zone for start_time and end_time. */
  tz: string;
}

/** The header row, in column order. */
export const CSV_COLUMNS = [
  'result_id',
  'result_url',
  'triage_url',
  'job_uid',
  'test_case',
  'result',
  'failure_reason',
  'start_time',
  'end_time',
  'duration',
  'category',
  'test_pack_sha',
  'test_pack_branch',
  'username',
  'tags',
  // Added after the first release: last, so scripts that read columns by position keep working.
  'infrastructure_error',
] as const;

const CRLF = '\r\n';

/**
 * One CSV field: quoted when it holds a comma, a quote, CR or LF (quotes
 * doubled), per RFC 4180. A field that a spreadsheet would run as a formula
 * (first character `=`, `+`, `-`, `@`, tab or CR) gets a leading `'`.
 */
export function csvField(value: string): string {
  if (!SPECIAL.test(value)) return value; // most cells: ids, URLs, times, numbers
  const v = FORMULA.test(value) ? `'${value}` : value;
  return /[",\r\n]/.test(v) ? `"${v.replace(/"/g, '""')}"` : v;
}

const FORMULA = /^[=+\-@\t\r]/;
const SPECIAL = /^[=+\-@\t\r]|[",\r\n]/;

/** Seconds with at most millisecond precision, no float noise (`12.3`, not `12.300000000000001`). */
export const seconds = (n: number): string => String(Math.round(n * 1000) / 1000);

/** Yields the header line, then one line per record, each ending in CRLF; for streaming large lists. */
export function* resultsCsvLines(records: Iterable<ResultRecord>, opts: CsvOptions): Generator<string> {
  const zone = new ZoneFormatter(opts.tz);
  yield CSV_COLUMNS.join(',') + CRLF;
  for (const r of records) yield csvRow(r, opts.base, zone) + CRLF;
}

/**
 * The whole CSV document: header row plus one row per result, CRLF line ends.
 * @throws FarmError `invalid_request` for an unknown `tz`.
 */
export function resultsCsv(records: Iterable<ResultRecord>, opts: CsvOptions): string {
  let out = '';
  for (const line of resultsCsvLines(records, opts)) out += line;
  return out;
}

function csvRow(r: ResultRecord, base: string, zone: ZoneFormatter): string {
  const time = (iso: string) => {
    const ts = instant(iso);
    return Number.isNaN(ts) ? iso : zone.iso(ts, { ms: true, offset: true });
  };
  const cells: Record<(typeof CSV_COLUMNS)[number], string> = {
    result_id: r.result_id,
    result_url: resultUrl(r, base, 'v2'),
    triage_url: triageUrl(r, base),
    job_uid: r.job_uid,
    test_case: r.test_case,
    result: r.result,
    failure_reason: r.failure_reason ?? '',
    start_time: time(r.start_time),
    end_time: time(r.end_time),
    duration: seconds(r.duration),
    category: r.category,
    test_pack_sha: r.test_pack_sha,
    test_pack_branch: r.test_pack_branch ?? '',
    username: r.username,
    tags: JSON.stringify(r.tags),
    infrastructure_error: kindOfRecord(r) ?? '',
  };
  return CSV_COLUMNS.map((c) => csvField(cells[c])).join(',');
}
