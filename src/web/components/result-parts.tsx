/**
 * Parts of the result page (pages/result.tsx): the run log with its seek
 * links, the strip of the test case's runs, failed matches and the artifact
 * tree. Every value is rendered by Preact, so escaped.
 */
import type { VNode } from 'preact';
import type { ZoneFormatter } from '../../http/formats/zone.js';
import { instant } from '../../http/formats/zone.js';
import { encodePath, videoOffset, type ArtifactNode, type CheckView, type History, type LogLine, type MatchFailure } from '../result-data.js';

const pageOf = (resultId: string): string => `/app/results${encodePath(resultId)}`;

/**
 * The log as a list of lines. With a video (`clock` = its start time) each
 * stamp is a `#t=<seconds>` link (the media-fragment way openQA uses) and each
 * line carries `data-time` (UTC ISO) so the script maps it to video time.
 */
export function RunLog(p: { lines: LogLine[]; clock?: string }): VNode {
  return (
    <ol class="runlog" id="runlog" aria-label="Run log">
      {p.lines.map((l) => {
        const t = p.clock && l.time ? videoOffset(l.time, p.clock) : undefined;
        return (
          <li data-time={l.time ?? undefined} data-offset={t === undefined ? undefined : t.toFixed(3)}>
            {l.time ? (
              t !== undefined ? (
                <a class="ts" href={`#t=${Math.max(0, t).toFixed(3)}`} title={`${t.toFixed(3)} s into the video`}>
                  {l.shown}
                </a>
              ) : (
                <span class="ts">{l.shown}</span>
              )
            ) : null}{' '}
            <span class="text">{l.text}</span>
          </li>
        );
      })}
    </ol>
  );
}

/** The runs of this test case, oldest first, this one marked; previous/next links and the verdict. */
export function RunStrip(p: { history: History; zone: ZoneFormatter }): VNode {
  const h = p.history;
  const when = (iso: string) => p.zone.iso(instant(iso), { ms: false, offset: true });
  return (
    <div class="run-strip">
      <p class="verdict">{h.verdict}</p>
      <ol class="strip" aria-label="Recent runs, oldest first">
        {h.runs.map((x, i) => (
          <li class={`run ${x.result}${i === h.at ? ' this' : ''}`}>
            <a href={pageOf(x.result_id)} aria-current={i === h.at ? 'page' : undefined} title={`${x.result} at ${when(x.start_time)}`}>
              <span class="outcome">{x.result}</span> <span class="when">{when(x.start_time)}</span>
            </a>
          </li>
        ))}
      </ol>
      <p class="prev-next">
        {h.previous ? (
          <a rel="prev" href={pageOf(h.previous.result_id)}>
            Previous run ({h.previous.result})
          </a>
        ) : (
          <span class="none">No earlier run</span>
        )}
        {' · '}
        {h.next ? (
          <a rel="next" href={pageOf(h.next.result_id)}>
            Next run ({h.next.result})
          </a>
        ) : (
          <span class="none">No later run</span>
        )}
      </p>
    </div>
  );
}

/** Each failed match: the template it looked for beside the frame it got, the best place boxed on the frame. */
export function MatchFailures(p: { failures: Array<MatchFailure & { size?: { width: number; height: number } }>; api: string; zone: ZoneFormatter }): VNode {
  const file = (name: string) => `${p.api}/artifacts/${encodePath(name)}`;
  return (
    <ul class="match-failures">
      {p.failures.map((f) => (
        <li class="match-failure">
          <p>
            <code>{f.call}</code> <code>{f.template}</code>: {f.detail}
            {f.time ? (
              <>
                {' '}
                at <time dateTime={f.time}>{p.zone.iso(instant(f.time), { ms: true, offset: true })}</time>
              </>
            ) : null}
          </p>
          {f.frame || f.templateImage ? (
            <div class="pair">
              {f.templateImage ? (
                <figure class="template">
                  <img src={file(f.templateImage)} alt={`The template ${f.template}`} />
                  <figcaption>Looked for</figcaption>
                </figure>
              ) : null}
              {f.frame ? (
                <figure class="frame">
                  {f.size && f.region ? (
                    <svg viewBox={`0 0 ${f.size.width} ${f.size.height}`} role="img" aria-label="The frame searched, the best place boxed">
                      <image href={file(f.frame)} x="0" y="0" width={f.size.width} height={f.size.height} />
                      <rect class="best" x={f.region.x} y={f.region.y} width={f.region.width} height={f.region.height} />
                    </svg>
                  ) : (
                    <img src={file(f.frame)} alt="The frame searched" />
                  )}
                  <figcaption>
                    Got (<a href={file(f.frame)}>frame</a>)
                  </figcaption>
                </figure>
              ) : null}
            </div>
          ) : (
            <p class="none">The frame was not saved.</p>
          )}
        </li>
      ))}
    </ul>
  );
}

/** Text files this small are open on the page; larger ones (up to the inline bound) one click away. */
const OPEN_TEXT_BYTES = 2048;

const bytes = (n: number): string => (n < 1024 ? `${n} B` : n < 1024 * 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1024 / 1024).toFixed(1)} MiB`);

/** The artifacts as nested lists; folders are `<details>` (open at the top), text inline, images inline. */
export function ArtifactTree(p: { nodes: ArtifactNode[]; api: string; depth?: number }): VNode {
  const depth = p.depth ?? 0;
  return (
    <ul class={depth === 0 ? 'tree' : undefined}>
      {p.nodes.map((n) => {
        const href = `${p.api}/artifacts/${encodePath(n.path)}`;
        if (n.kind === 'folder') {
          return (
            <li class="folder">
              <details open={depth === 0}>
                <summary>
                  {n.name}/ <span class="size">{bytes(n.size)}</span>
                </summary>
                <ArtifactTree nodes={n.children} api={p.api} depth={depth + 1} />
              </details>
            </li>
          );
        }
        return (
          <li class={`file ${n.kind}`} data-path={n.path}>
            <a href={href} download={n.name}>
              {n.name}
            </a>{' '}
            <span class="size" data-bytes={n.size}>
              {bytes(n.size)}
            </span>
            {n.text !== undefined ? (
              <details open={n.size <= OPEN_TEXT_BYTES}>
                <summary>show</summary>
                <pre class="inline-text">{n.text}</pre>
              </details>
            ) : null}
            {n.kind === 'image' ? (
              <a href={href} class="thumb">
                <img src={href} alt={n.path} loading="lazy" />
              </a>
            ) : null}
          </li>
        );
      })}
    </ul>
  );
}

const fmt = (n: number): string => String(Math.round(n * 1000) / 1000);

/** What a check found against what it needed, in words. */
export function checkVerdict(c: CheckView): string {
  const parts: string[] = [];
  if (c.score !== undefined && c.threshold !== undefined) {
    const op = c.kind === 'is_screen_black' ? (c.score <= c.threshold ? '<=' : '>') : c.score >= c.threshold ? '>=' : '<';
    const what = c.kind === 'is_screen_black' ? 'brightest' : c.kind === 'wait_for_motion' ? 'frames with motion' : 'score';
    parts.push(`${what} ${fmt(c.score)} ${op} threshold ${fmt(c.threshold)}`);
  }
  if (c.passes) parts.push(c.passes);
  if (c.kind === 'match_text' && c.text !== undefined) parts.push(`looked for "${c.text}", read: ${c.words.map((w) => w.text).join(' ') || '(nothing)'}`);
  if (c.kind === 'ocr' && c.text !== undefined) parts.push(`read "${c.text}"`);
  return parts.join('; ');
}

/**
 * One check: its time (a seek link on the video's clock), what it found against its threshold, the
 * frame with the searched region, the best place and the words boxed (an SVG over the saved frame:
 * attributes, no inline style, so the page's CSP holds), the template beside it.
 */
export function Check(p: { c: CheckView; api: string; clock?: string; zone: ZoneFormatter }): VNode {
  const { c } = p;
  const file = (name: string) => `${p.api}/artifacts/${encodePath(name)}`;
  const t = p.clock && c.time ? videoOffset(c.time, p.clock) : undefined;
  const state = c.passed === true ? 'pass' : c.passed === false ? 'fail' : 'info';
  return (
    <li class={`check ${state}`} data-time={c.time ?? undefined} data-kind={c.kind}>
      <p class="check-head">
        {c.time ? (
          t !== undefined ? (
            <a class="ts" href={`#t=${Math.max(0, t).toFixed(3)}`} title={`${t.toFixed(3)} s into the video`}>
              {p.zone.iso(instant(c.time), { ms: true, offset: true })}
            </a>
          ) : (
            <span class="ts">{p.zone.iso(instant(c.time), { ms: true, offset: true })}</span>
          )
        ) : null}{' '}
        <code class="kind">{c.kind}</code>
        {c.image ? <> <code>{c.image}</code></> : null} <span class={`badge ${state}`}>{c.passed === true ? 'passed' : c.passed === false ? 'failed' : 'read'}</span>{' '}
        <span class="verdict">{checkVerdict(c)}</span>
      </p>
      <div class="pair">
        {c.template ? (
          <figure class="template">
            <img src={file(c.template)} alt="The template looked for" />
            <figcaption>Looked for</figcaption>
          </figure>
        ) : null}
        {c.frame ? (
          <figure class="frame">
            {c.size ? (
              <svg viewBox={`0 0 ${c.size.width} ${c.size.height}`} role="img" aria-label={`The frame ${c.kind} looked at, its region boxed`}>
                <image href={file(c.frame)} x="0" y="0" width={c.size.width} height={c.size.height} />
                {c.region ? <rect class="region" x={c.region.x} y={c.region.y} width={c.region.width} height={c.region.height} /> : null}
                {c.matchRegion ? <rect class="best" x={c.matchRegion.x} y={c.matchRegion.y} width={c.matchRegion.width} height={c.matchRegion.height} /> : null}
                {c.words.map((w) => (
                  <rect class="word" x={w.x} y={w.y} width={w.width} height={w.height}>
                    <title>{`${w.text} (${fmt(w.conf)})`}</title>
                  </rect>
                ))}
              </svg>
            ) : (
              <img src={file(c.frame)} alt={`The frame ${c.kind} looked at`} />
            )}
            <figcaption>
              <a href={file(c.frame)}>Frame</a>
              {c.region ? ` region x=${c.region.x} y=${c.region.y} ${c.region.width}x${c.region.height} (dashed)` : ''}
              {c.matchRegion ? `; best place x=${c.matchRegion.x} y=${c.matchRegion.y} (solid)` : ''}
            </figcaption>
          </figure>
        ) : (
          <p class="none">The frame was not saved.</p>
        )}
      </div>
      {c.words.length > 0 ? (
        <ul class="words" aria-label="Words read">
          {c.words.map((w) => (
            <li>
              <code>{w.text}</code> {fmt(w.conf)}% at x={w.x} y={w.y}
            </li>
          ))}
        </ul>
      ) : null}
      <p class="params">
        Parameters <code>{c.params}</code>
        {c.preprocessing ? <>; preprocessing: {c.preprocessing}</> : null}
      </p>
    </li>
  );
}

/** Every recorded check, in time order. */
export function Checks(p: { checks: CheckView[]; api: string; clock?: string; zone: ZoneFormatter }): VNode {
  return (
    <ol class="checks" id="checks">
      {p.checks.map((c) => (
        <Check c={c} api={p.api} clock={p.clock} zone={p.zone} />
      ))}
    </ol>
  );
}
