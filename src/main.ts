#!/usr/bin/env node
/**
 * The `farmhand` command: arguments, config, signals. Nothing else.
 * The command line is in cli/program.ts (`farmhand help` lists it).
 *
 * Exit status: 0 done; 1 start-up failed (port in use, data directory in use,
 * ...); 64 a command-line mistake; 78 a configuration that can never work.
 * A failure is one line on stderr, never a stack trace.
 */
import { runCli, type ServeOptions } from './cli/program.js';
import { ConfigError, EX_CONFIG, loadConfig } from './config/load.js';
import { createLogger } from './logger.js';
import { describeReadiness } from './service/readiness.js';
import { SdNotify } from './service/sdNotify.js';
import { version } from './version.js';

async function serve(opts: ServeOptions): Promise<number> {
  let cfg;
  try {
    cfg = loadConfig(opts.config, {
      listen: opts.listen,
      data_dir: opts.dataDir,
      test_pack: opts.testPack,
      node_id: opts.nodeId,
      capture: opts.capture,
      ir: opts.ir,
    });
  } catch (e) {
    if (e instanceof ConfigError) {
      process.stderr.write(`farmhand: ${e.message}\n`);
      return EX_CONFIG;
    }
    throw e;
  }
  const logger = createLogger(cfg.log_level);
  // Loaded only now, so a bad config is reported without loading sharp, git, ...
  const { startDaemon, StartupError } = await import('./daemon.js');
  let daemon;
  try {
    daemon = await startDaemon(cfg, logger);
  } catch (e) {
    if (!(e instanceof StartupError)) throw e;
    // startDaemon has stopped whatever it had started; exit now, whatever handle is left.
    process.stderr.write(`farmhand: ${e.message}\n`);
    process.exit(e.exitCode);
  }
  process.stdout.write(`farmhand ${version} listening on ${daemon.url} (node ${cfg.node_id})\n`);
  const notify = new SdNotify(logger);
  // startDaemon resolved after the first frame (or its bound): READY says whether the node is ready, and if not, why.
  if (notify.enabled) notify.ready(`listening on ${daemon.url}; ${describeReadiness(await daemon.readiness())}`);
  await new Promise<void>((resolve) => {
    let stopping = false;
    const onSignal = (sig: NodeJS.Signals) => {
      if (stopping) {
        // A second Ctrl-C must not kill the process half-way: the running test's result
        // and the job are still being recorded (docs/robustness.md, "Stopping").
        logger.warn({ signal: sig }, 'already stopping: waiting for the running test to be recorded (SIGKILL abandons it)');
        return;
      }
      stopping = true;
      logger.info({ signal: sig }, 'stopping');
      // A running test gets its grace period and bookkeeping; tell systemd to wait that long.
      notify.stopping(cfg.runner.kill_grace_secs + cfg.runner.stop_response_secs);
      void daemon.stop().then(resolve, (e: unknown) => {
        logger.error({ err: e }, 'error while stopping');
        resolve();
      });
    };
    process.on('SIGTERM', onSignal).on('SIGINT', onSignal);
  });
  notify.close();
  return 0;
}

runCli(process.argv.slice(2), { out: process.stdout, err: process.stderr }, { serve }).then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    // Unexpected: still one line (the stack only when asked for, FARMHAND_DEBUG=1).
    const detail = process.env.FARMHAND_DEBUG && e instanceof Error ? (e.stack ?? e.message) : e instanceof Error ? e.message : String(e);
    process.stderr.write(`farmhand: ${detail}\n`);
    process.exitCode = 1;
  },
);
