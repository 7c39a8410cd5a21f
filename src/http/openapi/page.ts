/**
 * The API reference page (`/app/api`): the registry as one plain HTML page,
 * rendered on the server. No script and no external asset, under the same
 * Content-Security-Policy as the triage page; the schemas are shown as the
 * JSON Schema of the document, linked from each answer.
 */
import { html } from '../formats/text.js';
import { answersOf } from './document.js';
import { type Endpoint } from './registry.js';

/** The page's policy: the triage page's, with nothing loaded from anywhere. */
export const API_PAGE_CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'";

type Doc = { info: { title: string; version: string; description: string }; components: { schemas: Record<string, unknown> } };

/** JSON text of a schema with each `$ref` a link to its component on the page. */
const schemaHtml = (schema: unknown): string => html(JSON.stringify(schema, null, 2)).replace(/&quot;\$ref&quot;: &quot;#\/components\/schemas\/([A-Za-z0-9_]+)&quot;/g, (_m, id: string) => `&quot;$ref&quot;: <a href="#schema-${id}">${id}</a>`);

export function apiPage(doc: Doc, endpoints: readonly Endpoint[]): string {
  const byTag = new Map<string, Endpoint[]>();
  for (const e of endpoints) byTag.set(e.tag, [...(byTag.get(e.tag) ?? []), e]);
  const toc = [...byTag.keys()].map((t) => `<a href="#tag-${html(slug(t))}">${html(t)}</a>`).join(' · ');
  const sections = [...byTag].map(([tag, list]) => `<section id="tag-${html(slug(tag))}"><h2>${html(tag)}</h2>\n${list.map(endpoint).join('\n')}</section>`);
  const schemas = Object.entries(doc.components.schemas).map(([id, s]) => `<div class="schema" id="schema-${html(id)}"><h3>${html(id)}</h3><pre>${schemaHtml(s)}</pre></div>`);
  return [
    '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8" />',
    '<meta name="viewport" content="width=device-width, initial-scale=1" />',
    `<meta http-equiv="Content-Security-Policy" content="${API_PAGE_CSP}" />`,
    `<title>${html(doc.info.title)} API ${html(doc.info.version)}</title>\n<style>${CSS}</style>\n</head>\n<body>`,
    `<h1>${html(doc.info.title)} API <small>${html(doc.info.version)}</small></h1>`,
    `<p>${html(doc.info.description)}</p>`,
    '<p>Machine-readable: <a href="/api/openapi.json">/api/openapi.json</a> (OpenAPI 3.1).</p>',
    `<nav>${toc} · <a href="#schemas">schemas</a></nav>`,
    ...sections,
    `<section id="schemas"><h2>Schemas</h2>\n${schemas.join('\n')}</section>`,
    '</body>\n</html>\n',
  ].join('\n');
}

function endpoint(e: Endpoint): string {
  const answers = Object.entries(answersOf(e))
    .map(([status, a]) => {
      const types = Object.entries(a.content ?? {})
        .map(([type, body]) => `<code>${html(type)}</code>${typeof body === 'string' ? '' : ` ${schemaRef(body)}`}`)
        .join(', ');
      return `<tr><td>${status}</td><td>${html(a.description)}</td><td>${types || '<span class="none">no body</span>'}</td></tr>`;
    })
    .join('\n');
  const params = [
    ...Object.entries(e.params ?? {}).map(([n, d]) => `<li><code>${html(n)}</code> (path): ${html(d)}</li>`),
    ...Object.entries(e.query?.shape ?? {}).map(([n, s]) => `<li><code>${html(n)}</code> (query): ${html(String((s as { description?: string }).description ?? ''))}</li>`),
  ];
  const auth = e.auth === 'token' ? 'token required' : e.auth === 'v1' ? 'token only with auth.v1_requires_token' : 'no token';
  return [
    `<div class="op" id="${html(e.method + e.path)}"><h3><span class="m ${e.method}">${e.method.toUpperCase()}</span> <code>${html(e.path)}</code></h3>`,
    `<p>${html(e.summary)}${e.description ? `. ${html(e.description)}` : ''} <span class="auth">(${auth})</span></p>`,
    params.length ? `<ul>${params.join('')}</ul>` : '',
    e.body ? `<p>Body (JSON): ${schemaRef(e.body)}</p>` : '',
    `<table><tr><th>Status</th><th>Meaning</th><th>Body</th></tr>\n${answers}\n</table></div>`,
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

const CSS = `
body { font: 15px/1.45 system-ui, sans-serif; margin: 1.5em auto; max-width: 72em; padding: 0 1em; color: #222; }
h2 { font-size: 1.2em; border-bottom: 1px solid #ddd; margin-top: 2em; } h3 { font-size: 1em; margin: 1.2em 0 0.3em; }
.m { display: inline-block; min-width: 4em; padding: 0.1em 0.4em; border-radius: 0.3em; color: #fff; font-size: 0.8em; text-align: center; }
.get { background: #1565c0; } .post { background: #2e7d32; } .put { background: #ef6c00; } .delete { background: #c62828; }
table { border-collapse: collapse; } th, td { text-align: left; vertical-align: top; padding: 0.15em 0.8em 0.15em 0; }
pre { background: #f6f6f6; padding: 0.7em; overflow: auto; font-size: 13px; } .none, .auth { color: #777; }
`;
