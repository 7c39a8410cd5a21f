/**
 * The farm's node-scoped requests, from the table of endpoints: the entries a portal serves that say where their
 * node id is (`farm`, entry.ts), matched as the routers match them (the same @koa/router layers: case, trailing
 * slash, `*rest`). What reads it: which replica answers a request (src/farm/portal/nodePlace.ts), the portal's
 * router (src/farm/portal/routes.ts) and its stop (drain.ts: a long poll cut is a 202). An entry added to the
 * table is placed by it, wherever it sits in the table: a request matching several entries takes the most
 * specific (fewest wildcard segments, then most static characters), never the first mounted.
 */
import { Router, type Layer } from '@koa/router';
import type { Endpoint, FarmScope } from './entry.js';
import { ENDPOINTS } from './table.js';

/** A farm entry: one a portal serves, with its `farm` scope. */
export type FarmEndpoint = Endpoint & { farm: FarmScope };

/** A request placed: its entry, the node it is for (undefined: not given, or not a valid id) and its path parameters. */
export interface Placement {
  entry: FarmEndpoint;
  nodeId: string | undefined;
  params: Record<string, string>;
}

/** The table's entries a portal places by node. */
export const farmEndpoints = (entries: readonly Endpoint[] = ENDPOINTS): FarmEndpoint[] =>
  entries.filter((x): x is FarmEndpoint => x.farm !== undefined && x.served !== 'node');

/** The decoded path segment, or undefined when it is not one (a bad escape). */
function decoded(s: string | undefined): string | undefined {
  if (!s) return undefined;
  try {
    return decodeURIComponent(s);
  } catch {
    return undefined;
  }
}

/** Higher is more specific: a pattern without wildcards first, then the longer static text. */
const specificity = (path: string): number => (path.includes('*') ? 0 : 1_000_000) + path.replace(/[:*]\w+/g, '').length;

export class Placements {
  private readonly router = new Router();
  private readonly entries = new Map<Layer, FarmEndpoint>();

  constructor(entries: readonly Endpoint[] = ENDPOINTS) {
    for (const x of farmEndpoints(entries)) {
      const layer = this.router.register(x.path, [x.method], () => undefined) as Layer;
      this.entries.set(layer, x);
    }
  }

  /** The entry a request matches (HEAD as GET), or undefined when no farm entry does. */
  entryOf(method: string, path: string): { entry: FarmEndpoint; params: Record<string, string> } | undefined {
    let best: { layer: Layer; entry: FarmEndpoint } | undefined;
    for (const layer of this.router.match(path, method.toUpperCase()).pathAndMethod) {
      const entry = this.entries.get(layer);
      if (entry && (!best || specificity(entry.path) > specificity(best.entry.path))) best = { layer, entry };
    }
    if (!best) return undefined;
    const raw = best.layer.captures(path);
    const params: Record<string, string> = {};
    best.layer.paramNames.forEach((k, i) => {
      if (raw[i] !== undefined) params[String(k.name)] = raw[i];
    });
    return { entry: best.entry, params };
  }

  /** Where a request goes: its entry and node id; `body` is read only for an entry whose id is in the body. */
  place(method: string, path: string, body?: () => unknown): Placement | undefined {
    const found = this.entryOf(method, path);
    if (!found) return undefined;
    const { entry, params } = found;
    const field = entry.farm.id.startsWith('body.') ? entry.farm.id.slice('body.'.length) : undefined;
    const id = field === undefined ? decoded(params[entry.farm.id]) : (body?.() as Record<string, unknown> | null | undefined)?.[field];
    return { entry, nodeId: typeof id === 'string' ? id : undefined, params };
  }
}

let table: Placements | undefined;
/** The placements of the table of endpoints (made once, on first use). */
export const farmPlacements = (): Placements => (table ??= new Placements());
