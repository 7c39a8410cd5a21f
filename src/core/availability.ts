/**
 * Whether a node takes a job now, as a typed value (docs/farm.md, "Availability"): a kind and a detail.
 * The node works it out (core/node.ts), sends it to the portal in its hello and snapshots, and the portal
 * decides by the kind; the English `not_available_reason` of the v2 Node object is rendered from it here,
 * in one place, so that the string clients see is unchanged (docs/reservations.md) and nobody parses it.
 */

/** Why a node is not available; `available` when it is. */
export type AvailabilityKind = 'available' | 'offline' | 'licence_expired' | 'maintenance' | 'unhealthy' | 'reserved' | 'running';

export const AVAILABILITY_KINDS: readonly AvailabilityKind[] = ['available', 'offline', 'licence_expired', 'maintenance', 'unhealthy', 'reserved', 'running'];

/**
 * `detail` by kind: offline, why (the capture's or the connection's reason); licence_expired, the expiry
 * day `YYYY-MM-DD`; maintenance, `<message> (<who>, since <when>)` (core/maintenance.ts); unhealthy, the health check's whole reason (`health check failed: ...`); reserved,
 * `<user> (reservation <id>)`; running, the job_uid (or `starting`); available, null.
 */
export interface Availability {
  kind: AvailabilityKind;
  detail: string | null;
}

export const AVAILABLE: Availability = { kind: 'available', detail: null };

/** The v2 `not_available_reason` of an availability (null when available). */
export function availabilityText(a: Availability): string | null {
  const detail = a.detail ?? '';
  switch (a.kind) {
    case 'available':
      return null;
    case 'offline':
      return `offline: ${detail}`;
    case 'licence_expired':
      return `licence expired on ${detail}`;
    case 'maintenance':
      return `in maintenance: ${detail}`;
    case 'unhealthy':
      return detail;
    case 'reserved':
      return `reserved by ${detail}`;
    case 'running':
      return `running a test job (${detail})`;
  }
}

/** The value as given if it is an Availability (a kind this version knows, a string or null detail); else undefined. */
export function asAvailability(v: unknown): Availability | undefined {
  if (typeof v !== 'object' || v === null) return undefined;
  const { kind, detail } = v as { kind?: unknown; detail?: unknown };
  if (typeof kind !== 'string' || !(AVAILABILITY_KINDS as readonly string[]).includes(kind)) return undefined;
  if (detail !== null && typeof detail !== 'string') return undefined;
  if (kind === 'available' && detail !== null) return undefined;
  return { kind: kind as AvailabilityKind, detail };
}
