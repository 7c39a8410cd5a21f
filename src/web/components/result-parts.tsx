/**
 * Parts of the result page (pages/result.tsx): the run log with its seek
 * links, the strip of the test case's runs, failed matches and the artifact
 * tree. Every value is rendered by Preact, so escaped.
 */
import type { VNode } from 'preact';
import type { ZoneFormatter } from '../../http/formats/zone.js';
import { instant } from '../../http/formats/zone.js';
import { encodePath, videoOffset, type ArtifactNode, type History, type LogLine, type MatchFailure } from '../result-data.js';

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
