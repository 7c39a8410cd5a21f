/**
 * The results list (`/app/results`, docs/portal.md "Results list"): the
 * filter grammar of `GET /api/v2/results` in a search box, sorting by every
 * column the API sorts on, and a row fragment (`/app/results/row`) that the
 * page's client script asks for when a run finishes, so a new row is rendered
 * by the same component and tested against the same filter as the list.
 */
import Router from '@koa/router';
import type { Context } from 'koa';
import { DateTime } from 'luxon';
import type { VNode } from 'preact';
import { renderToString } from 'preact-render-to-string';
import { FarmError, isFarmError } from '../../core/errors.js';
import type { ResultRecord } from '../../core/model.js';
import { DEFAULT_RESULT_LIMIT, parseResultQuery, type ResultQuery, type SortField } from '../../core/query.js';
import type { Services } from '../../http/context.js';
import { sendPage, wantsPage } from '../layout.js';
import { mount } from '../../http/endpoints/mount.js';

/**
 * Where the list reads its results: the node's in-memory index (`nodeResults`), or on the farm's
 * portal the farm-wide index in PostgreSQL (src/farm/portal/web.ts). The query is the node's
 * (`parseResultQuery`) either way, so the grammar, its errors and the sort are one.
 */
export interface ResultsSource {
  query(q: ResultQuery): ResultRecord[] | Promise<ResultRecord[]>;
  /**
   * One result; `waitMs`: the live rows ask just after `run.finished`, and on the portal a result reaches
   * the index only when its node has uploaded it, so the portal waits up to that long for it.
   */
  get(id: string, o?: { waitMs?: number }): ResultRecord | 'deleted' | undefined | Promise<ResultRecord | 'deleted' | undefined>;
  /** Results of many nodes: a Node column, and the page says "farm". */
  farm?: boolean;
}

/** The node's own results: its in-memory index. */
export const nodeResults = (s: Services): ResultsSource => ({ query: (q) => s.results.query(q), get: (id) => s.results.get(id) });

/** How long the live row waits for a just-finished result to reach the list's source. */
const ROW_WAIT_MS = 15_000;

/** The list's columns, in order; `sort` names the API's sort field of those it sorts on. */
const COLUMNS: { label: string; sort?: SortField }[] = [
  { label: 'Result', sort: 'result' },
  { label: 'Node' },
  { label: 'Test case', sort: 'testcase' },
  { label: 'Job', sort: 'job' },
  { label: 'Category', sort: 'category' },
  { label: 'Time', sort: 'date' },
  { label: 'Duration', sort: 'duration' },
  { label: 'Failure reason' },
  { label: 'Screenshot' },
];

const OUTCOME_MARK = { pass: '✓', fail: '✗', error: '!' } as const;

/** The raw parameters as given, echoed back into the box and the links (valid or not). */
interface Params {
  filter: string;
  sort: string;
  tz: string;
}

function paramsOf(ctx: Context): Params {
  const one = (v: unknown) => (typeof v === 'string' ? v : Array.isArray(v) ? String(v[0] ?? '') : '');
  return { filter: one(ctx.query.filter), sort: one(ctx.query.sort), tz: one(ctx.query.tz) };
}

/** `/app/results?...` with the empty parameters left out, so a shared URL stays short. */
export function listUrl(p: Params): string {
  const q = new URLSearchParams();
  if (p.filter) q.set('filter', p.filter);
  if (p.sort) q.set('sort', p.sort);
  if (p.tz) q.set('tz', p.tz);
  const s = q.toString();
  return s ? `/app/results?${s}` : '/app/results';
}

export const formatTime = (iso: string, tz: string): string => DateTime.fromISO(iso, { zone: 'utc' }).setZone(tz).toFormat('yyyy-MM-dd HH:mm:ss');

export function formatDuration(secs: number): string {
  if (secs < 60) return `${secs.toFixed(1)} s`;
  const m = Math.floor(secs / 60);
  return `${m} min ${Math.round(secs - m * 60)} s`;
}

/** The node id of a result: the first segment of its job uid (`/<node>/<hex>/<n>`). */
const nodeOf = (r: ResultRecord): string => r.job_uid.split('/')[1] ?? '';

/** One result as a row; also the fragment the live script inserts. `farm`: with the Node column. */
export function ResultRow({ r, tz, farm = false }: { r: ResultRecord; tz: string; farm?: boolean }): VNode {
  return (
    <tr data-result-id={r.result_id}>
      <td>
        <span class={`outcome ${r.result}`}>
          <span aria-hidden="true">{OUTCOME_MARK[r.result]}</span> {r.result}
        </span>
      </td>
      {farm ? (
        <td class="node">
          <a href={`/#node-${nodeOf(r)}`}>{nodeOf(r)}</a>
        </td>
      ) : null}
      <td class="testcase">
        <a href={`/app/results${r.result_id}`}>{r.test_case}</a>
      </td>
      <td>
        <a href={`/app/jobs${r.job_uid}`}>{r.job_uid.slice(r.job_uid.lastIndexOf('/') + 1)}</a>
      </td>
      <td>{r.category}</td>
      <td>
        <time dateTime={r.start_time}>{formatTime(r.start_time, tz)}</time>
      </td>
      <td class="num">{formatDuration(r.duration)}</td>
      <td class="reason">{r.failure_reason ?? ''}</td>
      <td>
        {/* The end-of-run thumbnail the capture writes beside the screenshot (320 px JPEG); read through v1 like the result page's links. */}
        <a href={`/api/v1/result${r.result_id}/screenshot.png`} tabIndex={-1}>
          <img class="thumb" src={`/api/v1/result${r.result_id}/artifacts/thumbnail.jpg`} alt="" loading="lazy" width={96} height={54} />
        </a>
      </td>
    </tr>
  );
}

function SortHeader({ label, field, p, current }: { label: string; field: SortField; p: Params; current: ResultQuery['sort'] | undefined }): VNode {
  const active = current?.field === field;
  const dir = active ? current.dir : undefined;
  // First click: dates and durations newest/longest first, names A to Z; a second click reverses.
  const next = active ? (dir === 'asc' ? 'desc' : 'asc') : field === 'date' || field === 'duration' ? 'desc' : 'asc';
  return (
    <th scope="col" aria-sort={dir === 'asc' ? 'ascending' : dir === 'desc' ? 'descending' : undefined} data-sort={field}>
      <a href={listUrl({ ...p, sort: `${field}:${next}` })} title={`Sort by ${label.toLowerCase()}, ${next === 'asc' ? 'ascending' : 'descending'}`}>
        {label}
        {dir ? <span aria-hidden="true">{dir === 'asc' ? ' ▲' : ' ▼'}</span> : null}
      </a>
    </th>
  );
}

interface ListProps {
  farm: boolean;
  p: Params;
  q?: ResultQuery;
  rows: ResultRecord[];
  more: boolean;
  problem?: { message: string; term?: string };
}

function ResultsList({ farm, p, q, rows, more, problem }: ListProps): VNode {
  return (
    <>
      <h1>{farm ? 'Results of every node' : 'Results'}</h1>
      <form class="results-search" method="get" action="/app/results" role="search">
        <label for="filter">Filter</label>
        <input
          id="filter"
          name="filter"
          type="search"
          value={p.filter}
          size={60}
          placeholder='e.g. result:fail category:nightly date:today "did not match"'
          aria-invalid={problem ? 'true' : undefined}
          aria-describedby={problem ? 'filter-error' : 'filter-help'}
        />
        {p.sort ? <input type="hidden" name="sort" value={p.sort} /> : null}
        {p.tz ? <input type="hidden" name="tz" value={p.tz} /> : null}
        <button type="submit">Search</button>
        {problem ? (
          <p id="filter-error" class="filter-error" role="alert">
            {problem.term !== undefined ? (
              <>
                Bad term <code class="bad-term">{problem.term}</code>:{' '}
              </>
            ) : null}
            {problem.message}
          </p>
        ) : (
          <p id="filter-help" class="filter-help">
            Keys <code>result:</code> <code>testcase:</code> <code>category:</code> <code>job:</code> <code>date:</code>, <code>-</code> negates, other words
            search the text. {q ? `Times in ${q.tz}.` : ''}
          </p>
        )}
      </form>
      {problem ? null : (
        <>
          <p class="results-count" id="results-count">
            {more ? `Showing the first ${rows.length.toLocaleString('en')} matching results; more matched: narrow the filter to see them.` : `${rows.length} result${rows.length === 1 ? '' : 's'}.`}
          </p>
          <table class="results" id="results" data-filter={p.filter} data-sort={p.sort} data-tz={p.tz}>
            <caption class="visually-hidden">Results, sorted by {q?.sort.field} {q?.sort.dir === 'asc' ? 'ascending' : 'descending'}</caption>
            <thead>
              <tr>
                {COLUMNS.filter((c) => farm || c.label !== 'Node').map((c) =>
                  c.sort ? <SortHeader label={c.label} field={c.sort} p={p} current={q?.sort} /> : <th scope="col">{c.label}</th>,
                )}
              </tr>
            </thead>
            <tbody>
              {rows.map((r) => (
                <ResultRow r={r} tz={q?.tz ?? 'UTC'} farm={farm} />
              ))}
            </tbody>
          </table>
          {rows.length === 0 ? (
            <p id="no-results" class="no-results">
              No results match.
            </p>
          ) : null}
        </>
      )}
    </>
  );
}

export function resultsRouter(source: ResultsSource): Router {
  const r = new Router();
  const farm = source.farm ?? false;

  mount(r, 'GET /app/results', async (ctx) => {
    const p = paramsOf(ctx);
    // On the farm's portal, the farm's navigation (a node's own links /app/live and /app/api, which the portal has not).
    const opts = { title: 'Results', section: 'results' as const, scripts: ['results.js'], ...(farm && { farm: true }) };
    let q: ResultQuery;
    try {
      // One more than shown, to know whether more matched.
      q = parseResultQuery(ctx.query, { limit: DEFAULT_RESULT_LIMIT + 1 });
    } catch (e) {
      if (!isFarmError(e) || (e.code !== 'invalid_filter' && e.code !== 'invalid_request') || !wantsPage(ctx)) throw e;
      const term = typeof e.details?.term === 'string' ? e.details.term : undefined;
      sendPage(ctx, <ResultsList farm={farm} p={p} rows={[]} more={false} problem={{ message: e.message, term }} />, { ...opts, scripts: [] }, 400);
      return;
    }
    const found = await source.query(q);
    const rows = found.slice(0, DEFAULT_RESULT_LIMIT);
    sendPage(ctx, <ResultsList farm={farm} p={p} q={q} rows={rows} more={found.length > rows.length} />, opts);
  });

  // The live script's question "does this new result belong in my list?": the row when it matches the filter, else 204.
  mount(r, 'GET /app/results/row', async (ctx) => {
    const q = parseResultQuery({ filter: ctx.query.filter, tz: ctx.query.tz });
    const id = ctx.query.result_id;
    if (typeof id !== 'string' || id === '') throw new FarmError('invalid_request', 'result_id is required: the id of a finished result');
    const rec = await source.get(id, { waitMs: ROW_WAIT_MS });
    if (rec === 'deleted') throw new FarmError('gone', `result ${id} has been deleted (retention)`);
    if (rec === undefined) throw new FarmError('not_found', `no result ${id}`);
    if (!q.predicate(rec)) {
      ctx.status = 204;
      return;
    }
    ctx.type = 'text/html; charset=utf-8';
    ctx.set('Cache-Control', 'no-store');
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.body = `<table><tbody>${renderToString(<ResultRow r={rec} tz={q.tz} farm={farm} />)}</tbody></table>`;
  });

  return r;
}
