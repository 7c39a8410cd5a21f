/**
 * The API reference page (`/app/api`): the table of endpoints' operations as HTML inside the web
 * pages' layout (header, navigation, the page CSP: no script, no inline
 * style), rendered on the server. Descriptions are Markdown (marked, raw HTML
 * shown as text). A table of contents, one section per endpoint group, and
 * each endpoint and schema a closed `<details>`, so the page is short on a
 * phone and a link to `#schema-X` opens the one it names.
 */
import { html } from '../formats/text.js';
import { renderMarkdown, renderMarkdownInline } from '../markdown.js';
import { answersOf, asciiJson } from './document.js';
import type { Operation } from './endpoint.js';

/** The page's policy: the web pages' own (default-src 'none', scripts and styles only from this origin). */
export const API_PAGE_CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; media-src 'self' blob:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

type Doc = { info: { title: string; version: string; description: string }; components: { schemas: Record<string, unknown> } };

/** JSON text of a schema with each `$ref` a link to its component on the page. */
const schemaHtml = (schema: unknown): string => html(asciiJson(JSON.stringify(schema, null, 2))).replace(/&quot;\$ref&quot;: &quot;#\/components\/schemas\/([A-Za-z0-9_]+)&quot;/g, (_m, id: string) => `&quot;$ref&quot;: <a href="#schema-${id}">${id}</a>`);

/** The page's main content (the layout goes around it). */
export function apiPage(doc: Doc, endpoints: readonly Operation[]): string {
  const byTag = new Map<string, Operation[]>();
  for (const e of endpoints) byTag.set(e.tag, [...(byTag.get(e.tag) ?? []), e]);
  const toc = [...byTag].map(([t, list]) => `<li><a href="#tag-${html(slug(t))}">${html(t)}</a> <span class="api-count">(${list.length})</span></li>`).join('');
  const back = '<p class="api-back"><a href="#api-contents">Back to contents</a></p>';
  const sections = [...byTag].map(([tag, list]) => `<section class="api-group" id="tag-${html(slug(tag))}" aria-labelledby="h-tag-${html(slug(tag))}"><h2 id="h-tag-${html(slug(tag))}">${html(tag)}</h2>\n${list.map(endpoint).join('\n')}\n${back}</section>`);
  const schemas = Object.entries(doc.components.schemas).map(([id, s]) => `<details class="api-schema" id="schema-${html(id)}"><summary>${html(id)}</summary><pre>${schemaHtml(s)}</pre></details>`);
  return [
    `<div class="api-page"><h1>${html(doc.info.title)} API <small>${html(doc.info.version)}</small></h1>`,
    `<div class="api-intro">${renderMarkdown(doc.info.description)}</div>`,
    '<p>Machine-readable: <a href="/api/openapi.json">/api/openapi.json</a> (OpenAPI 3.1). Back to <a href="/">the node</a>.</p>',
    `<nav class="api-toc" id="api-contents" aria-labelledby="h-contents"><h2 id="h-contents">Contents</h2><ol>${toc}<li><a href="#schemas">Schemas</a> <span class="api-count">(${schemas.length})</span></li></ol></nav>`,
    ...sections,
    `<section class="api-group" id="schemas" aria-labelledby="h-schemas"><h2 id="h-schemas">Schemas</h2>\n${schemas.join('\n')}\n${back}</section></div>`,
  ].join('\n');
}

function endpoint(e: Operation): string {
  const answers = Object.entries(answersOf(e))
    .map(([status, a]) => {
      const types = Object.entries(a.content ?? {})
        .map(([type, body]) => `<code>${html(type)}</code>${typeof body === 'string' ? '' : ` ${schemaRef(body)}`}`)
        .join(', ');
      return `<tr><td>${status}</td><td>${renderMarkdownInline(a.description)}</td><td>${types || '<span class="none">no body</span>'}</td></tr>`;
    })
    .join('\n');
  const params = [
    ...Object.entries(e.params ?? {}).map(([n, d]) => `<li><code>${html(n)}</code> (path): ${renderMarkdownInline(d)}</li>`),
    ...Object.entries(e.query?.shape ?? {}).map(([n, s]) => `<li><code>${html(n)}</code> (query): ${renderMarkdownInline(String((s as { description?: string }).description ?? ''))}</li>`),
  ];
  const auth = e.auth === 'token' ? 'token required' : e.auth === 'v1' ? 'token only with auth.v1_requires_token' : 'no token';
  return [
    `<details class="api-op" id="${html(e.method + e.path)}"><summary><span class="m ${e.method}">${e.method.toUpperCase()}</span> <code>${html(e.path)}</code> <span class="api-summary">${renderMarkdownInline(e.summary)}</span></summary>`,
    e.description ? `<div class="api-desc">${renderMarkdown(e.description)}</div>` : '',
    `<p class="auth">${auth}</p>`,
    params.length ? `<ul>${params.join('')}</ul>` : '',
    e.body ? `<p>Body (JSON): ${schemaRef(e.body)}</p>` : '',
    `<div class="api-table"><table><tr><th>Status</th><th>Meaning</th><th>Body</th></tr>\n${answers}\n</table></div></details>`,
  ].join('\n');
}

function schemaRef(schema: unknown): string {
  const meta = (schema as { meta?: () => { id?: string } | undefined }).meta?.();
  if (meta?.id) return `<a href="#schema-${html(meta.id)}">${html(meta.id)}</a>`;
  const def = (schema as { def?: { type?: string; element?: unknown } }).def;
  if (def?.type === 'array') return `array of ${schemaRef(def.element)}`;
  return 'see the document';
}

const slug = (s: string) => s.replace(/[^A-Za-z0-9]+/g, '-');

