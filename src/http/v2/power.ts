/**
 * `POST /api/v2/nodes/<id>/power/cycle`, an extension of v2 (docs/power.md, "The power-cycle endpoint"): the
 * node's outlet (`power.uri`) off, `off_secs`, on, answered once the outlet reads on again. Role `manual` (the
 * table of endpoints checks it), audited as `power.cycle`; the portal forwards it to the node by its entry.
 *
 * Refused before anything is switched:
 * - 404 `not_found` for another node id, or a node without an outlet (`power.uri` none);
 * - 403 `forbidden` while another user holds the node's reservation;
 * - 409 `conflict` while a test job runs (its script owns the device: `stbt.PDU`), or while a cycle asked
 *   through this endpoint is under way: a second click would only switch the device off again.
 * A device that fails is the driver's 503 `device_unavailable`, within the URI's timeout (src/hardware/power/).
 */
import type Router from '@koa/router';
import type { Context } from 'koa';
import { FarmError } from '../../core/errors.js';
import { userOf, type NodePower, type Services } from '../context.js';
import { mount } from '../endpoints/mount.js';
import { checkedBody } from '../endpoints/validate.js';
import { PowerCycleRequest } from '../endpoints/v2.js';

/** A cycle asked through this endpoint, under way. */
interface Cycling {
  by: string;
  started: string;
}

const underWay = new WeakMap<NodePower, Cycling>();

export function mountPowerRoutes(r: Router, s: Services): void {
  mount(r, 'POST /api/v2/nodes/:node_id/power/cycle', async (ctx) => {
    const power = powerOf(ctx, s);
    const user = userOf(ctx);
    power.assertCanUse(user, 'power-cycle the device');
    const running = s.jobs.isRunning();
    if (running) {
      const uid = s.jobs.current()?.job_uid ?? 'starting';
      throw new FarmError('conflict', `a test job is running (${uid}): its script owns the device; stop the job or wait for it to end, then power-cycle`);
    }
    const busy = underWay.get(power);
    if (busy) throw new FarmError('conflict', `the device is being power-cycled already (by ${busy.by}, since ${busy.started}); wait for that cycle to end`);
    const offSecs = checkedBody(ctx, PowerCycleRequest).off_secs ?? power.outlet.offSecs;
    ctx.body = await cycle(s, power, { by: user ?? 'anonymous', offSecs });
  });
}

/** The node's outlet; 404 for another node's id or a node without one. */
function powerOf(ctx: Context, s: Services): NodePower {
  const id = (ctx.params as Record<string, string>).node_id;
  if (id !== s.nodeId) throw new FarmError('not_found', `no node ${JSON.stringify(id)}; this node is ${s.nodeId}`);
  if (!s.power) throw new FarmError('not_found', `node ${s.nodeId} has no power outlet: power.uri is "none" in its configuration (docs/power.md)`);
  return s.power;
}

/** Off, `offSecs`, on; the answer once the outlet reads on. The cycle runs to its end even if the caller goes away. */
async function cycle(s: Services, power: NodePower, o: { by: string; offSecs: number }) {
  const started = new Date().toISOString();
  underWay.set(power, { by: o.by, started });
  const log = s.logger.child({ module: 'power' });
  log.info({ user: o.by, off_secs: o.offSecs, outlet: power.outlet.uri }, 'power cycle asked through the API');
  try {
    const on = await power.outlet.cycle(o.offSecs);
    if (!on) throw new FarmError('device_unavailable', `the outlet (${power.outlet.uri}) still reads off after the cycle: check the PDU and its outlet`);
  } catch (e) {
    log.warn({ user: o.by, err: e instanceof FarmError ? e.message : String(e) }, 'power cycle failed');
    throw e;
  } finally {
    underWay.delete(power);
  }
  return { node_id: s.nodeId, off_secs: o.offSecs, started, ended: new Date().toISOString() };
}
