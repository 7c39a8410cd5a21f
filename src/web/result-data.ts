/**
 * What the result page shows, read from a result folder and the store: the
 * tail of the run log as lines with their times, the video's clock
 * (`video.json`, written by the recorder beside `video.mp4`), the failed
 * matches the log names, the artifacts as a tree with small text files
 * inline, and the other runs of the same test case. Plain data; the page
 * (pages/result.tsx) renders it.
 */
import type { ArtifactListing, ResultRecord } from '../core/model.js';
import type { ResultRepository } from '../core/ports.js';
import type { FilterTerm } from '../core/query.js';
import { convertLogTz } from '../http/formats/logTz.js';
import { stripUnsafeChars } from '../http/formats/text.js';
import { openServed } from '../http/files.js';

/** What the page's readers need of a result store: its files (the node's ResultRepository, the portal's StoredResults). */
export interface ResultFiles {
  openArtifact(resultId: string, relPath: string): Promise<{ path: string; size: number } | undefined>;
}

/** How many lines of the log the page shows inline; the full log is a link away. */
export const LOG_TAIL_LINES = 500;
/** The page reads at most this much of the end of the log, not a whole 64 MiB log. */
export const LOG_READ_BYTES = 1024 * 1024;
/** Text artifacts up to this size are shown inline. */
export const INLINE_TEXT_BYTES = 32 * 1024;
/** At most this much text inline in all, whatever the number of files. */
export const INLINE_TEXT_TOTAL = 512 * 1024;
/** Runs of the same test case in the strip. */
export const HISTORY_RUNS = 20;

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

/** Read at most the last `max` bytes of a file, dropping a partial first line when the read starts mid-file. */
export async function readTail(file: string, size: number, max = LOG_READ_BYTES): Promise<Buffer> {
  const fh = await openServed(file);
  try {
    const len = Math.min(size, max);
    const buf = Buffer.alloc(len);
    await fh.read(buf, 0, len, size - len);
    return size > len ? buf.subarray(buf.indexOf(0x0a) + 1) : buf;
  } finally {
    await fh.close();
  }
}

/** One line of the run log as shown. */
export interface LogLine {
  /** The stamp as stored (UTC), ISO; null for a line without one (a continuation). */
  time: string | null;
  /** The stamp in the page's zone, as shown. */
  shown: string;
  text: string;
}

const STAMP = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}[+-]\d{2}:\d{2}) (.*)$/s;

/** The log's last lines, split into stamp and text, with the stamps shown in `tz`. */
export function logLines(log: Buffer, tz: string, n = LOG_TAIL_LINES): { lines: LogLine[]; truncated: boolean } {
  const { tail, truncated } = logTail(log, n);
  if (tail.length === 0) return { lines: [], truncated };
  const utc = tail.toString('utf8').split('\n');
  const local = tz === 'UTC' ? utc : convertLogTz(tail, tz).toString('utf8').split('\n');
  const lines = utc.map((u, i): LogLine => {
    const m = STAMP.exec(stripUnsafeChars(u));
    const l = STAMP.exec(stripUnsafeChars(local[i] ?? u));
    if (!m) return { time: null, shown: '', text: stripUnsafeChars(u) };
    return { time: m[1]!, shown: l?.[1] ?? m[1]!, text: m[2]! };
  });
  return { lines, truncated };
}

/** Seconds from the video's first frame to a log stamp (ISO): the one clock the log and the video share. */
export function videoOffset(stamp: string, videoStart: string): number {
  const micros = /\.(\d{6})/.exec(stamp)?.[1];
  const ms = Date.parse(stamp) + (micros ? Number(micros.slice(3)) / 1000 : 0);
  return Math.round(ms - Date.parse(videoStart)) / 1000;
}

/** When the video's first frame was shown: `video.json`'s `start_time`, or undefined when absent or unreadable. */
export async function videoStart(results: ResultFiles, resultId: string): Promise<string | undefined> {
  const file = await results.openArtifact(resultId, 'video.json');
  if (!file || file.size > 4096) return undefined;
  try {
    const text = (await readTail(file.path, file.size, 4096)).toString('utf8');
    const t = (JSON.parse(text) as { start_time?: unknown }).start_time;
    return typeof t === 'string' && !Number.isNaN(Date.parse(t)) ? new Date(Date.parse(t)).toISOString() : undefined;
  } catch {
    return undefined;
  }
}

/** A failed `match` / `wait_for_match` the log records, with the frame and template the library saved. */
export interface MatchFailure {
  call: 'match' | 'wait_for_match';
  template: string;
  /** The log line's details: confidence, threshold, region. */
  detail: string;
  time: string | null;
  frame?: string;
  templateImage?: string;
  region?: { x: number; y: number; width: number; height: number };
}

const MATCH_LINE = /^(wait_for_match|match) (.+?): ((?:no match|timed out).*?)(?:; saved (\S+-frame\.png) (\S+-template\.png))?$/;
const REGION = /Region\(x=(-?\d+), y=(-?\d+), (?:right=\S+, bottom=\S+|width=(\d+), height=(\d+))/;

/** The failed matches among the log's lines, oldest first; artifacts the listing lacks are left out. */
export function matchFailures(lines: LogLine[], artifacts: ArtifactListing): MatchFailure[] {
  const out: MatchFailure[] = [];
  for (const l of lines) {
    const m = MATCH_LINE.exec(l.text);
    if (!m) continue;
    const r = REGION.exec(m[3]!);
    out.push({
      call: m[1] as MatchFailure['call'],
      template: m[2]!,
      detail: m[3]!,
      time: l.time,
      frame: m[4] && artifacts[m[4]] ? m[4] : undefined,
      templateImage: m[5] && artifacts[m[5]] ? m[5] : undefined,
      region: r && r[3] ? { x: Number(r[1]), y: Number(r[2]), width: Number(r[3]), height: Number(r[4]) } : undefined,
    });
  }
  return out;
}

/** Width and height of a PNG from its header, or undefined. */
export async function pngSize(results: ResultFiles, resultId: string, name: string): Promise<{ width: number; height: number } | undefined> {
  const file = await results.openArtifact(resultId, name);
  if (!file || file.size < 24) return undefined;
  const fh = await openServed(file.path);
  try {
    const b = Buffer.alloc(24);
    await fh.read(b, 0, 24, 0);
    if (b.toString('latin1', 12, 16) !== 'IHDR') return undefined;
    return { width: b.readUInt32BE(16), height: b.readUInt32BE(20) };
  } finally {
    await fh.close();
  }
}

/** A node of the artifact tree. */
export interface ArtifactNode {
  name: string;
  /** Relative path from the result folder. */
  path: string;
  size: number;
  kind: 'folder' | 'text' | 'image' | 'video' | 'other';
  children: ArtifactNode[];
  /** A small text file's content (undefined when not shown inline). */
  text?: string;
}

const TEXT = /\.(log|txt|json|py|xml|csv|md|ini|conf|yaml|yml|html?|vtt|sh|cfg)$/i;
const IMAGE = /\.(png|jpe?g|gif|webp)$/i;
const VIDEO = /\.(mp4|webm)$/i;

/** The listing as a tree of folders (sorted: folders first, then files by name). */
export function artifactTree(listing: ArtifactListing): ArtifactNode[] {
  const root: ArtifactNode = { name: '', path: '', size: 0, kind: 'folder', children: [] };
  for (const [p, { size }] of Object.entries(listing)) {
    const parts = p.split('/');
    let dir = root;
    parts.slice(0, -1).forEach((part, i) => {
      let next = dir.children.find((c) => c.kind === 'folder' && c.name === part);
      if (!next) dir.children.push((next = { name: part, path: parts.slice(0, i + 1).join('/'), size: 0, kind: 'folder', children: [] }));
      dir = next;
    });
    const name = parts.at(-1)!;
    const kind = TEXT.test(name) ? 'text' : IMAGE.test(name) ? 'image' : VIDEO.test(name) ? 'video' : 'other';
    dir.children.push({ name, path: p, size, kind, children: [] });
  }
  const sort = (n: ArtifactNode): void => {
    n.children.sort((a, b) => Number(b.kind === 'folder') - Number(a.kind === 'folder') || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    n.children.forEach(sort);
    n.size = n.kind === 'folder' ? n.children.reduce((s, c) => s + c.size, 0) : n.size;
  };
  sort(root);
  return root.children;
}

/** Read the small text files of the tree into it, within the per-file and total bounds. */
export async function inlineTexts(nodes: ArtifactNode[], results: ResultFiles, resultId: string): Promise<void> {
  let budget = INLINE_TEXT_TOTAL;
  const visit = async (n: ArtifactNode): Promise<void> => {
    if (n.kind === 'folder') {
      for (const c of n.children) await visit(c);
      return;
    }
    if (n.kind !== 'text' || n.size > INLINE_TEXT_BYTES || n.size > budget) return;
    const file = await results.openArtifact(resultId, n.path);
    if (!file) return;
    const buf = await readTail(file.path, file.size, INLINE_TEXT_BYTES);
    budget -= buf.length;
    n.text = stripUnsafeChars(buf.toString('utf8'));
  };
  for (const n of nodes) await visit(n);
}

/** The runs of the same test case around this one, oldest first, and what they say about it. */
export interface History {
  runs: Array<Pick<ResultRecord, 'result_id' | 'result' | 'start_time' | 'test_pack_sha'>>;
  /** Index of this run in `runs`. */
  at: number;
  previous?: History['runs'][number];
  next?: History['runs'][number];
  /** A short verdict: a new failure, flaky, failing since..., passing. */
  verdict: string;
}

export function history(results: ResultRepository, r: ResultRecord, n = HISTORY_RUNS): History {
  // The parsed term too (a test case without '*' is an exact name): the results store then answers from its columns.
  const terms: FilterTerm[] | undefined = r.test_case.includes('*') ? undefined : [{ negated: false, kind: 'testcase', value: r.test_case }];
  const all = results
    .query({ predicate: (x) => x.test_case === r.test_case, terms, sort: { field: 'date', dir: 'asc' }, tz: 'UTC', limit: Number.MAX_SAFE_INTEGER })
    .map(({ result_id, result, start_time, test_pack_sha }) => ({ result_id, result, start_time, test_pack_sha }));
  return historyOf(all, r, n);
}

/** The strip and verdict from every run of the test case, oldest first (however the store found them). */
export function historyOf(all: History['runs'], r: ResultRecord, n = HISTORY_RUNS): History {
  const i = Math.max(0, all.findIndex((x) => x.result_id === r.result_id));
  // The last n runs; when this run is older than those, the n around it.
  const from = all.length - i > n ? Math.max(0, i - Math.floor(n / 2)) : Math.max(0, all.length - n);
  const runs = all.slice(from, from + n);
  return { runs, at: i - from, previous: all[i - 1], next: all[i + 1], verdict: verdictOf(all.slice(0, i + 1), r) };
}

function verdictOf(upToThis: History['runs'], r: ResultRecord): string {
  const before = upToThis.slice(0, -1);
  const passed = (x: { result: string }) => x.result === 'pass';
  const recent = upToThis.slice(-10);
  const flips = recent.slice(1).filter((x, k) => passed(x) !== passed(recent[k]!)).length;
  if (before.length === 0) return passed(r) ? 'The first run of this test case: passed.' : 'The first run of this test case.';
  if (flips >= 3) return `Flaky: the outcome changed ${flips} times in the last ${recent.length} runs.`;
  if (passed(r)) return passed(before.at(-1)!) ? 'Passing, as in the previous run.' : 'Passing again after a failure.';
  let k = before.length - 1;
  while (k >= 0 && !passed(before[k]!)) k--;
  if (k === before.length - 1) return 'New: the previous run of this test case passed.';
  if (k < 0) return `Not passed in any of the ${upToThis.length} runs here.`;
  return `Not passing for ${before.length - k} runs, since ${before[k + 1]!.start_time}.`;
}

/** `00:01:02.345` */
const vttTime = (secs: number): string => {
  const ms = Math.max(0, Math.round(secs * 1000));
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor(ms / 60_000) % 60;
  const sec = (ms % 60_000) / 1000;
  return `${String(h).padStart(2, '0')}:${String(m).padStart(2, '0')}:${sec.toFixed(3).padStart(6, '0')}`;
};

/** How long the last line of the log stays on screen as a caption. */
const LAST_CUE_SECS = 3;

/**
 * The log as a WebVTT track on the video's clock: lines with the same stamp
 * make one cue, shown until the next stamp (the last one for a few seconds).
 * Cue text is escaped the way WebVTT wants (`&`, `<`, `>`), and `-->` cannot appear.
 */
export function logVtt(lines: LogLine[], clock: string): string {
  const groups: Array<{ t: number; text: string[] }> = [];
  for (const l of lines) {
    if (!l.time) {
      groups.at(-1)?.text.push(l.text);
      continue;
    }
    const t = videoOffset(l.time, clock);
    if (groups.length > 0 && groups.at(-1)!.t === t) groups.at(-1)!.text.push(l.text);
    else groups.push({ t, text: [l.text] });
  }
  const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  const cues = groups
    .filter((g) => g.text.some((x) => x.trim() !== ''))
    .map((g, i, all) => {
      const end = Math.max(all[i + 1]?.t ?? g.t + LAST_CUE_SECS, g.t + 0.001);
      const text = g.text.filter((x) => x.trim() !== '').map(esc).join('\n');
      return `${vttTime(g.t)} --> ${vttTime(end)}\n${text}\n`;
    });
  return `WEBVTT\n\n${cues.join('\n')}`;
}

/** A box in frame pixels. */
export interface Box { x: number; y: number; width: number; height: number }

/** One stbt check as the page shows it (from `checks.jsonl`, python/stbt_core/_checks.py). */
export interface CheckView {
  kind: string;
  /** true passed, false failed, null neither (ocr). */
  passed: boolean | null;
  /** ISO time of the frame the check looked at (else when it was made), or null. */
  time: string | null;
  region?: Box;
  matchRegion?: Box;
  score?: number;
  threshold?: number;
  /** The first and confirm passes of a match. */
  passes?: string;
  text?: string;
  image?: string;
  words: Array<Box & { text: string; conf: number }>;
  /** Artifacts (listed) of the frame and the match's template. */
  frame?: string;
  template?: string;
  size?: { width: number; height: number };
  params: string;
  preprocessing?: string;
}

/** How much of the end of `checks.jsonl` the page reads, and how many of its last checks it shows. */
export const CHECKS_READ_BYTES = 1 << 20;
export const CHECKS_SHOWN = 100;

const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
const str = (v: unknown, max = 500): string | undefined => (typeof v === 'string' ? v.slice(0, max) : undefined);
const box = (v: unknown): Box | undefined => {
  if (typeof v !== 'object' || v === null) return undefined;
  const o = v as Record<string, unknown>;
  const [x, y, width, height] = [num(o.x), num(o.y), num(o.width), num(o.height)];
  return x !== undefined && y !== undefined && width !== undefined && height !== undefined ? { x, y, width, height } : undefined;
};

/**
 * The checks of `checks.jsonl` (written by the test: anything may be in it), in time order, the last
 * `CHECKS_SHOWN`. Frames and templates are kept only when they are listed artifacts under `checks/`.
 */
export function parseChecks(text: string, artifacts: ArtifactListing): CheckView[] {
  const out: CheckView[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    let o: Record<string, unknown>;
    try {
      const v: unknown = JSON.parse(line);
      if (typeof v !== 'object' || v === null || Array.isArray(v)) continue;
      o = v as Record<string, unknown>;
    } catch {
      continue;
    }
    const kind = str(o.kind, 40);
    if (kind === undefined) continue;
    const secs = num(o.time) ?? num(o.wall);
    const asset = (v: unknown) => {
      const p = str(v, 300);
      return p !== undefined && p.startsWith('checks/') && artifacts[p] ? p : undefined;
    };
    const size = Array.isArray(o.frame_size) && num(o.frame_size[0]) && num(o.frame_size[1]) ? { width: o.frame_size[0] as number, height: o.frame_size[1] as number } : undefined;
    const fp = o.first_pass as Record<string, unknown> | undefined;
    const cf = o.confirm as Record<string, unknown> | undefined;
    const passName = (v: unknown) => (v === true ? 'passed' : v === false ? 'failed' : 'not run');
    out.push({
      kind,
      passed: typeof o.passed === 'boolean' ? o.passed : null,
      time: secs !== undefined && secs > 0 && secs < 1e11 ? new Date(secs * 1000).toISOString() : null,
      region: box(o.region),
      matchRegion: box(o.match_region),
      score: num(o.score),
      threshold: num(o.threshold),
      passes: typeof fp === 'object' && fp !== null && typeof cf === 'object' && cf !== null ? `first pass ${passName(fp.passed)}, confirm pass ${passName(cf.passed)}` : undefined,
      text: str(o.text),
      image: str(o.image, 200),
      words: (Array.isArray(o.words) ? o.words : []).slice(0, 200).flatMap((w: unknown) => {
        const b = box(w);
        const t = str((w as Record<string, unknown>)?.text, 100);
        return b && t !== undefined ? [{ ...b, text: t, conf: num((w as Record<string, unknown>).conf) ?? -1 }] : [];
      }),
      frame: asset(o.frame),
      template: asset(o.template),
      size,
      params: typeof o.params === 'object' && o.params !== null ? JSON.stringify(o.params).slice(0, 500) : '',
      preprocessing: Array.isArray(o.preprocessing) ? o.preprocessing.filter((s) => typeof s === 'string').join(', ').slice(0, 300) : undefined,
    });
  }
  out.sort((a, b) => (a.time ?? '').localeCompare(b.time ?? ''));
  return out.slice(-CHECKS_SHOWN);
}

/** The checks of a result (none without `checks.jsonl`). */
export async function readChecks(src: { openArtifact(resultId: string, relPath: string): Promise<{ path: string; size: number } | undefined> }, resultId: string, artifacts: ArtifactListing): Promise<CheckView[]> {
  if (!artifacts['checks.jsonl']) return [];
  const file = await src.openArtifact(resultId, 'checks.jsonl');
  if (!file) return [];
  return parseChecks((await readTail(file.path, file.size, CHECKS_READ_BYTES)).toString('utf8'), artifacts);
}
