/**
 * The table of endpoints as Markdown, for docs/auth.md ("Who may call what"): a test checks that the doc
 * holds exactly this text between its markers, so the doc cannot drift from the table either. Regenerate:
 * `node --import tsx -e "import('./src/http/endpoints/doc.ts').then((m) => process.stdout.write(m.endpointsMarkdown()))"`.
 */
import { ENDPOINTS, type Endpoint } from './table.js';

export const DOC_START = '<!-- endpoints table: generated from src/http/endpoints/ -->';
export const DOC_END = '<!-- end of the endpoints table -->';

const who = (e: Endpoint): string => (e.role === 'public' ? 'anyone (public)' : e.role === 'node' ? 'a node (its credential)' : `\`${e.role}\``);
const where = (e: Endpoint): string => (e.served === 'both' ? 'node, portal' : e.served);

export function endpointsMarkdown(): string {
  const rows = ENDPOINTS.map((e) => `| \`${e.method}\` | \`${e.path.replace(/\|/g, '\\|')}\` | ${who(e)} | ${e.action} | ${where(e)} | ${e.audit ? `\`${e.audit}\`` : ''} |`);
  return [DOC_START, '', '| method | path | needs | action (in the 403) | served by | audited as |', '|---|---|---|---|---|---|', ...rows, '', DOC_END].join('\n');
}
