/**
 * The portal's reading of a node's availability (docs/farm.md, "Availability"). A node of this version sends
 * it typed, a kind and a detail, in its hello and snapshots. A node of the previous version (same protocol
 * number) sends only its v2 `not_available_reason`: this is the one place where that string is read, by the
 * prefixes docs/reservations.md fixes, so that a farm can upgrade its portal first and its nodes one by one.
 * Nothing else on the portal looks at the text.
 */
import { AVAILABLE, asAvailability, type Availability } from '../../core/availability.js';
import type { NodeSnapshot } from '../protocol.js';

/** The node's availability as its hello or snapshot says it: typed if it sent one this version knows, else from its reason string. */
export function nodeAvailability(m: NodeSnapshot): Availability {
  return asAvailability(m.availability) ?? legacyAvailability((m.snapshot as Partial<Record<string, unknown>> | null)?.not_available_reason);
}

/** A previous version's `not_available_reason`, by prefix; a reason none matches is the node's own (a health check's). */
export function legacyAvailability(reason: unknown): Availability {
  if (reason === null || reason === undefined) return AVAILABLE;
  const text = typeof reason === 'string' ? reason : JSON.stringify(reason);
  const prefixed: [string, Availability['kind']][] = [
    ['offline: ', 'offline'],
    ['licence expired on ', 'licence_expired'],
    ['reserved by ', 'reserved'],
  ];
  for (const [prefix, kind] of prefixed) if (text.startsWith(prefix)) return { kind, detail: text.slice(prefix.length) };
  const running = /^running a test job \((.*)\)$/s.exec(text);
  if (running) return { kind: 'running', detail: running[1]! };
  return { kind: 'unhealthy', detail: text };
}
