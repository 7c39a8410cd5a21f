/**
 * The triage page of one result (`/app/results/<result_id>`, the v2
 * `triage_url`): everything a person needs to decide why a test failed on one
 * plain HTML page - fields, failure reason and traceback, the end-of-run
 * screenshot, the video, the tail of the log and links to every artifact.
 * No script and no external asset; every value from the run is escaped.
 * The markup is also well-formed XML (void elements closed with `/>`), so
 * tests can read it with a strict parser.
 */
import type { ArtifactListing, ResultRecord } from '../core/model.js';
import { seconds } from './formats/csv.js';
import { convertLogTz } from './formats/logTz.js';
import { html } from './formats/text.js';
import { instant, ZoneFormatter } from './formats/zone.js';

/** How many lines of the log the page shows inline; the full log is a link away. */
export const LOG_TAIL_LINES = 500;

/** What the page shows. */
export interface TriageInput {
  record: ResultRecord;
  artifacts: ArtifactListing;
  /** The stored run log (`farmhand.log`, UTC stamps), or null when the run has none. */
  logText: Buffer | string | null;
  /** Absolute base URL, no trailing slash. */
  base: string;
  /** IANA zone for the times on the page (default UTC). */
  tz?: string;
  /**
   * Which API the page links to (default v2). The daemon's page uses v1: a
   * browser sends no token, and v1's reads are open unless the node requires
   * tokens on v1 too.
   */
  api?: 'v1' | 'v2';
}

/** `/a b/c` -> `/a%20b/c`: each segment of a path encoded on its own. */
export const encodePath = (p: string): string => p.split('/').map(encodeURIComponent).join('/');

/** The last `n` lines of a log (bytes, undecoded), and whether earlier lines were left out. */
export function logTail(log: Buffer, n: number): { tail: Buffer; truncated: boolean } {
  let end = log.length;
  if (end > 0 && log[end - 1] === 0x0a) end -= 1; // a final newline does not start another line
  let start = end;
  for (let i = 0; i < n; i++) {
    // lastIndexOf reads a negative offset as counted from the end, so stop at 0 first
    const nl = start === 0 ? -1 : log.lastIndexOf(0x0a, start - 1);
    if (nl < 0) return { tail: log.subarray(0, end), truncated: false };
    start = nl;
  }
  return { tail: log.subarray(start + 1, end), truncated: true };
}

/**
 * The triage page as a complete HTML document.
 * @throws FarmError `invalid_request` for an unknown `tz`.
 */
export function triagePage(input: TriageInput): string {
  const { record: r, base } = input;
  const zone = new ZoneFormatter(input.tz ?? 'UTC');
  const api = `${base}${input.api === 'v1' ? '/api/v1/result' : '/api/v2/results'}${encodePath(r.result_id)}`;
  const title = `${r.result}: ${r.test_case}`;
  return [
    '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8" />',
    '<meta name="viewport" content="width=device-width, initial-scale=1" />',
    // No script is needed, so none may run, whatever a test managed to print.
    `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src *; media-src *; base-uri 'none'; form-action 'none'" />`,
    `<title>${html(title)}</title>\n<style>${CSS}</style>\n</head>\n<body>`,
    `<h1><span class="badge ${r.result}">${html(r.result)}</span> ${html(r.test_case)}</h1>`,
    failureSection(r),
    fieldsSection(r, base, zone, input.api ?? 'v2'),
    mediaSection(input.artifacts, api),
    logSection(input, api, zone.tz),
    artifactsSection(input.artifacts, api),
    '</body>\n</html>\n',
  ].join('\n');
}

/** What the page of a run still in progress shows. */
export interface RunningPageInput {
  resultId: string;
  testCase: string;
  /** ISO 8601. */
  startTime: string;
  base: string;
  tz?: string;
  api?: 'v1' | 'v2';
}

/**
 * The triage page of the run in progress (the node's job links it from the
 * run's start): what runs and since when, a link to the log as written so far,
 * and a refresh every 5 s until the result is recorded and the full page
 * takes its place.
 */
export function runningPage(input: RunningPageInput): string {
  const zone = new ZoneFormatter(input.tz ?? 'UTC');
  const api = `${input.base}${input.api === 'v1' ? '/api/v1/result' : '/api/v2/results'}${encodePath(input.resultId)}`;
  return [
    '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8" />',
    '<meta name="viewport" content="width=device-width, initial-scale=1" />',
    `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'" />`,
    '<meta http-equiv="refresh" content="5" />',
    `<title>${html(`running: ${input.testCase}`)}</title>\n<style>${CSS}</style>\n</head>\n<body>`,
    `<h1><span class="badge running">running</span> ${html(input.testCase)}</h1>`,
    `<p>Started ${html(zone.iso(instant(input.startTime), { ms: false, offset: true }))} (${html(zone.tz)}). This page reloads every 5 seconds until the run is recorded.</p>`,
    `<p><a href="${html(`${api}/farmhand.log`)}">the log so far</a></p>`,
    '</body>\n</html>\n',
  ].join('\n');
}

function failureSection(r: ResultRecord): string {
  if (r.failure_reason === null && r.traceback === null) return '';
  const reason = r.failure_reason === null ? '' : `<p class="reason">${html(r.failure_reason)}</p>`;
  const tb = r.traceback === null ? '' : `<pre class="traceback">${html(r.traceback)}</pre>`;
  return `<section><h2>Failure</h2>${reason}${tb}</section>`;
}

function fieldsSection(r: ResultRecord, base: string, zone: ZoneFormatter, v: 'v1' | 'v2'): string {
  const time = (iso: string) => {
    const ts = instant(iso);
    return html(Number.isNaN(ts) ? iso : zone.iso(ts, { ms: true, offset: true }));
  };
  const link = (href: string, text: string) => `<a href="${html(href)}">${html(text)}</a>`;
  const tags = Object.entries(r.tags).map(([k, v]) => `<code>${html(k)}</code> = ${html(v)}`).join('<br />');
  const rows: Array<[string, string]> = [
    ['Result', html(r.result)],
    ['Test case', `<code>${html(r.test_case)}</code>`],
    ['Result id', link(`${base}${v === 'v1' ? '/api/v1/result' : '/api/v2/results'}${encodePath(r.result_id)}`, r.result_id)],
    ['Job', link(`${base}/api/${v}/jobs${encodePath(r.job_uid)}`, r.job_uid)],
    ['Start', time(r.start_time)],
    ['End', time(r.end_time)],
    ['Duration', `${html(seconds(r.duration))} s`],
    ['Category', html(r.category)],
    ['Test pack', `<code>${html(r.test_pack_sha)}</code>${r.test_pack_branch === null ? '' : ` (${html(r.test_pack_branch)})`}`],
    ['User', html(r.username)],
    ['Tags', tags || '<span class="none">none</span>'],
  ];
  const body = rows.map(([k, v]) => `<tr><th>${k}</th><td>${v}</td></tr>`).join('\n');
  return `<section><h2>Run</h2>\n<table class="fields">\n${body}\n</table></section>`;
}

function mediaSection(artifacts: ArtifactListing, api: string): string {
  const parts: string[] = [];
  if (artifacts['screenshot.png']) {
    const src = html(`${api}/screenshot.png`);
    parts.push(`<figure><a href="${src}"><img src="${src}" alt="Screenshot at the end of the run" /></a><figcaption>Screenshot at the end of the run</figcaption></figure>`);
  }
  const video = ['video.mp4', 'video.webm'].find((name) => artifacts[name]);
  if (video) {
    const src = html(`${api}/artifacts/${encodePath(video)}`);
    parts.push(`<figure><video controls="controls" preload="metadata" src="${src}"></video><figcaption><a href="${src}">${html(video)}</a></figcaption></figure>`);
  }
  return parts.length === 0 ? '' : `<section class="media"><h2>Screen</h2>${parts.join('')}</section>`;
}

function logSection(input: TriageInput, api: string, tz: string): string {
  if (input.logText === null) return '<section><h2>Log</h2><p class="none">This run has no log.</p></section>';
  const raw = typeof input.logText === 'string' ? Buffer.from(input.logText) : input.logText;
  const { tail, truncated } = logTail(raw, LOG_TAIL_LINES);
  const shown = (tz === 'UTC' ? tail : convertLogTz(tail, tz)).toString('utf8');
  const full = html(`${api}/farmhand.log${tz === 'UTC' ? '' : `?tz=${encodeURIComponent(tz)}`}`);
  const note = truncated ? `The last ${LOG_TAIL_LINES} lines; ` : '';
  return `<section><h2>Log</h2><p>${note}<a href="${full}">full log</a></p><pre class="log">${html(shown)}</pre></section>`;
}

function artifactsSection(artifacts: ArtifactListing, api: string): string {
  const names = Object.keys(artifacts).sort();
  if (names.length === 0) return '<section><h2>Artifacts</h2><p class="none">No files.</p></section>';
  const rows = names.map((name) => {
    const href = html(`${api}/artifacts/${encodePath(name)}`);
    return `<tr><td><a href="${href}">${html(name)}</a></td><td class="size">${artifacts[name]!.size}</td></tr>`;
  });
  const listing = html(`${api}/artifacts/`);
  return (
    `<section><h2>Artifacts</h2><p><a href="${listing}">listing as JSON</a></p>\n` +
    `<table class="artifacts"><tr><th>File</th><th>Bytes</th></tr>\n${rows.join('\n')}\n</table></section>`
  );
}

const CSS = `
body { font: 15px/1.45 system-ui, sans-serif; margin: 1.5em auto; max-width: 72em; padding: 0 1em; color: #222; }
h1 { font-size: 1.3em; word-break: break-all; } h2 { font-size: 1.1em; border-bottom: 1px solid #ddd; }
.badge { padding: 0.1em 0.5em; border-radius: 0.3em; color: #fff; text-transform: uppercase; font-size: 0.85em; }
.pass { background: #2e7d32; } .running { background: #1565c0; } .fail { background: #c62828; } .error { background: #ef6c00; }
.reason { font-weight: bold; white-space: pre-wrap; }
pre { background: #f6f6f6; padding: 0.7em; overflow: auto; white-space: pre-wrap; word-break: break-all; }
pre.log { max-height: 40em; font-size: 13px; }
table { border-collapse: collapse; } th, td { text-align: left; vertical-align: top; padding: 0.2em 0.8em 0.2em 0; }
td.size { text-align: right; font-variant-numeric: tabular-nums; } .none { color: #777; }
img, video { max-width: 100%; border: 1px solid #ccc; } figure { margin: 0 0 1em 0; }
`;
