/**
 * `farmhand portal --config <file>`: load the portal's config, start it, stop
 * it on SIGTERM or SIGINT (close the nodes' connections, flush last_seen, end
 * the pool). Exit 78 for a config that can never work, or another portal
 * already running on the database (one line naming it; systemd's unit does not
 * restart on 78), 1 when it cannot start. A portal whose lock another portal
 * took while its database connection was down exits 1 at once, writing nothing
 * more (src/farm/db/portalLock.ts); so does a replica (replicas "many") that lost its lease.
 */
import type { Writable } from 'node:stream';
import { ConfigError, EX_CONFIG } from '../config/load.js';
import { createLogger } from '../logger.js';
import { version } from '../version.js';

export async function runPortalCommand(o: { config: string }, out: Writable, err: Writable): Promise<number> {
  const { loadPortalConfig } = await import('../farm/portal/config.js');
  let cfg;
  try {
    cfg = loadPortalConfig(o.config);
  } catch (e) {
    if (e instanceof ConfigError) {
      err.write(`farmhand: ${e.message}\n`);
      return EX_CONFIG;
    }
    throw e;
  }
  const logger = createLogger(cfg.log_level);
  const { startFarmPortal } = await import('../farm/portal/farm.js');
  const { PortalLockHeld, describeHolder } = await import('../farm/db/portalLock.js');
  let portal;
  try {
    portal = await startFarmPortal(cfg, logger, {
      // As a SIGKILL would: no hub close, no flush, no "offline" rows; the other portal owns the farm now.
      onLockLost: (holder) => {
        err.write(`farmhand: another farmhand portal took this database's portal lock while this one's connection was down (${describeHolder(holder)}); this portal stops\n`);
        process.exit(1);
      },
      // Replicas "many": the lease lost, the replica stopped acting (its nodes reconnect elsewhere); systemd restarts it.
      onLeaseLost: (why) => {
        err.write(`farmhand: this portal replica lost its lease (${why}); it stops and writes nothing more (docs/farm.md, "Many portals")\n`);
        process.exit(1);
      },
    });
  } catch (e) {
    if (e instanceof PortalLockHeld || e instanceof ConfigError) {
      err.write(`farmhand: ${e.message}\n`);
      return EX_CONFIG;
    }
    err.write(`farmhand: the portal could not start: ${(e as Error).message}\n`);
    return 1;
  }
  out.write(`farmhand ${version} portal listening on ${portal.url}\n`);
  await new Promise<void>((resolve) => {
    let stopping = false;
    const onSignal = (sig: NodeJS.Signals) => {
      if (stopping) return;
      stopping = true;
      logger.info({ signal: sig }, 'stopping');
      portal.stop().then(resolve, (e: unknown) => {
        logger.error({ err: e }, 'error while stopping');
        resolve();
      });
    };
    process.on('SIGTERM', onSignal).on('SIGINT', onSignal);
  });
  return 0;
}
