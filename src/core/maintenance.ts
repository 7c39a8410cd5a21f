/**
 * Maintenance of a node (docs/api-notes.md, "Maintenance"): an administrator takes the node out of service
 * with a message, and puts it back. While it is in maintenance the node takes no new reservation (409) and
 * no run (503), and its v2 status says so (`available: false`, `not_available_reason: "in maintenance:
 * <message> (<who>, since <when>)"`). What is under way goes on: a reservation held stays its owner's, a
 * running job runs to its end (the administrator interrupts or stops them, which anyone may, if needed), and
 * the live view and the remote still work (the administrator may need them to fix the box).
 *
 * Persisted (the node's state file), so a restart does not put a box under repair back into service.
 */
import { FarmError, invalid } from './errors.js';

export interface MaintenanceState {
  /** What the administrator said: why, and until when. */
  message: string;
  /** Who put the node in maintenance. */
  by: string;
  /** ISO 8601, UTC. */
  since: string;
}

export interface MaintenanceStore {
  load(): MaintenanceState | null;
  save(m: MaintenanceState | null): Promise<void>;
}

/** The request: `{"on": true, "message": "..."}` or `{"on": false}`. */
export interface MaintenanceRequest {
  on: boolean;
  message: string | null;
}

export const MAX_MAINTENANCE_MESSAGE = 500;

/** Check a maintenance request's body; a 400 names what to fix. */
export function parseMaintenanceRequest(body: unknown): MaintenanceRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw invalid('the body must be a JSON object: {"on": true, "message": "<why, until when>"} or {"on": false}');
  }
  const b = body as Record<string, unknown>;
  const extra = Object.keys(b).filter((k) => k !== 'on' && k !== 'message');
  if (extra.length) throw invalid(`unknown field ${JSON.stringify(extra[0])}: the fields are "on" (true or false) and "message"`);
  if (typeof b.on !== 'boolean') throw invalid('on is required: true to put the node in maintenance, false to take it out');
  if (!b.on) {
    if (b.message !== undefined && b.message !== null && typeof b.message !== 'string') throw invalid('message must be a string');
    return { on: false, message: null };
  }
  if (typeof b.message !== 'string' || b.message.trim() === '') {
    throw invalid('message is required to put a node in maintenance: say why and until when (it is shown as the node\'s not_available_reason)');
  }
  const message = b.message.trim();
  if (message.length > MAX_MAINTENANCE_MESSAGE) throw invalid(`message is too long: at most ${MAX_MAINTENANCE_MESSAGE} characters`);
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(message)) throw invalid('message must be one line without control characters');
  return { on: true, message };
}

export class MaintenanceService {
  private state: MaintenanceState | null;
  constructor(private readonly o: { store: MaintenanceStore; now?: () => number }) {
    this.state = o.store.load();
  }

  /** The node's maintenance now; null when it is in service. */
  current(): MaintenanceState | null {
    return this.state;
  }

  /** Put the node in maintenance (again: the new message and time replace the old) or take it out; idempotent. */
  async set(req: MaintenanceRequest, by: string): Promise<{ before: MaintenanceState | null; after: MaintenanceState | null }> {
    const before = this.state;
    const after = req.on ? { message: req.message ?? '', by, since: new Date((this.o.now ?? Date.now)()).toISOString() } : null;
    await this.o.store.save(after);
    this.state = after;
    return { before, after };
  }
}

/** The reason text of a node in maintenance (the detail of its availability). */
export const maintenanceDetail = (m: MaintenanceState): string => `${m.message} (${m.by}, since ${m.since})`;

/** The 503 of a run refused because the node is in maintenance. */
export const inMaintenance = (nodeId: string, m: MaintenanceState): FarmError =>
  new FarmError('device_unavailable', `node ${nodeId} is in maintenance: ${maintenanceDetail(m)}; an administrator takes it out with POST /api/v2/nodes/${nodeId}/maintenance {"on": false}`);
