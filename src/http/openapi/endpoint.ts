/**
 * The OpenAPI side of the table of endpoints (src/http/endpoints/): each entry with a summary as one
 * operation of the document, its method in OpenAPI's lower case and its path as an OpenAPI template
 * (`/api/v2/reservations/{reservation_id}` for the router's `/api/v2/reservations/:id`: the k-th parameter
 * of the pattern takes the k-th key of the entry's `params`). The document (document.ts), the reference
 * page (page.ts) and the suite's contract check read these.
 */
import { ENDPOINTS, isDocumented, TAGS, type Answer, type ApiFields, type Body, type Endpoint, type FarmScope, type Need } from '../endpoints/table.js';

export type { Answer, Body };
export type Method = 'get' | 'post' | 'put' | 'delete';

export interface Operation extends ApiFields {
  method: Method;
  /** OpenAPI path template. A parameter listed in MULTI_SEGMENT may span several segments. */
  path: string;
  /** Who may call it (the entry's role): the document's `x-farmhand-role`. */
  role: Need;
  /** On a farm portal, how a request for one node is answered (the portal's 503 when the node is away). */
  farm?: FarmScope;
}

/** Path parameters that match the rest of the path, slashes included (branch names, artifact paths). */
export const MULTI_SEGMENT = new Set(['test_pack_revision', 'artifact_path']);

/** The router's pattern as an OpenAPI template, each parameter named by the entry's `params`, in order. */
export function openApiPath(x: Pick<Endpoint, 'method' | 'path' | 'params'>): string {
  const names = Object.keys(x.params ?? {});
  let i = 0;
  const out = x.path.replace(/[:*](\w+)/g, () => {
    const name = names[i++];
    if (name === undefined) throw new Error(`table of endpoints: ${x.method} ${x.path} has more path parameters than params describe`);
    return `{${name}}`;
  });
  if (i !== names.length) throw new Error(`table of endpoints: ${x.method} ${x.path} describes ${names.length} params for ${i} path parameters`);
  return out;
}

export function toOperation(x: Endpoint): Operation {
  if (!isDocumented(x)) throw new Error(`table of endpoints: ${x.method} ${x.path} has no summary`);
  if (x.method === 'PATCH') throw new Error(`table of endpoints: ${x.method} ${x.path}: PATCH is not used by the API`);
  return { ...x, method: x.method.toLowerCase() as Method, path: openApiPath(x) };
}

/** Every operation of the document, by group (TAGS), in the table's order within a group. */
export const OPERATIONS: readonly Operation[] = ENDPOINTS.filter(isDocumented)
  .map(toOperation)
  .sort((a, b) => TAGS.indexOf(a.tag) - TAGS.indexOf(b.tag));
