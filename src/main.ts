#!/usr/bin/env node
/**
 * The `farmhand` command: arguments, config, signals. Nothing else.
 *
 *   farmhand serve [--config FILE] [--listen HOST:PORT] [--data-dir DIR]
 *                  [--test-pack PATH|URL] [--node-id ID] [--capture URI] [--ir URI]
 *   farmhand --version
 */
import { parseArgs } from 'node:util';
import { ConfigError, EX_CONFIG, loadConfig } from './config/load.js';
import { createLogger } from './logger.js';
import { SdNotify } from './service/sdNotify.js';
import { version } from './version.js';

const USAGE = `usage:
  farmhand serve [--config FILE] [--listen HOST:PORT] [--data-dir DIR]
                 [--test-pack PATH|URL] [--node-id ID] [--capture URI] [--ir URI]
  farmhand token create --user NAME | list | revoke ID   (--config FILE | --data-dir DIR)
  farmhand ir encode <file.lircd.conf> <KEY>... [--remote NAME] [--count N]
  farmhand --version`;

const EX_USAGE = 64;

async function serve(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      config: { type: 'string', short: 'c' },
      listen: { type: 'string' },
      'data-dir': { type: 'string' },
      'test-pack': { type: 'string' },
      'node-id': { type: 'string' },
      capture: { type: 'string' },
      ir: { type: 'string' },
    },
    strict: true,
  });
  let cfg;
  try {
    cfg = loadConfig(values.config, {
      listen: values.listen,
      data_dir: values['data-dir'],
      test_pack: values['test-pack'],
      node_id: values['node-id'],
      capture: values.capture,
      ir: values.ir,
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
  const { startDaemon } = await import('./daemon.js');
  const daemon = await startDaemon(cfg, logger);
  process.stdout.write(`farmhand ${version} listening on ${daemon.url} (node ${cfg.node_id})\n`);
  const notify = new SdNotify(logger);
  notify.ready(`listening on ${daemon.url}`);
  await new Promise<void>((resolve) => {
    const onSignal = (sig: NodeJS.Signals) => {
      logger.info({ signal: sig }, 'stopping');
      // A running test gets its grace period and bookkeeping; tell systemd to wait that long.
      notify.stopping(cfg.runner.kill_grace_secs + cfg.runner.stop_response_secs);
      process.off('SIGTERM', onSignal).off('SIGINT', onSignal);
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

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case 'serve':
      return serve(rest);
    case 'token': {
      const { tokenCommand } = await import('./cli/token.js');
      return tokenCommand(rest, process.stdout, process.stderr);
    }
    case 'ir': {
      if (rest[0] !== 'encode') break;
      const { irEncodeCommand } = await import('./hardware/ir/lirc/cli.js');
      return irEncodeCommand(rest.slice(1), process.stdout, process.stderr);
    }
    case '--version':
    case 'version':
      process.stdout.write(`${version}\n`);
      return 0;
    case '--help':
    case 'help':
      process.stdout.write(`${USAGE}\n`);
      return 0;
  }
  process.stderr.write(`${USAGE}\n`);
  return EX_USAGE;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    process.stderr.write(`farmhand: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exitCode = e instanceof TypeError && (e as { code?: string }).code?.startsWith('ERR_PARSE_ARGS') ? EX_USAGE : 1;
  },
);
