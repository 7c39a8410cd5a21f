/**
 * Loading the configuration: file, then command-line overrides, then the
 * schema. Every problem is collected and reported as `path: message`; the
 * caller exits with 78 (EX_CONFIG) so systemd does not restart-loop.
 */
import { readFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import path from 'node:path';
import { configSchema, type FarmConfig } from './schema.js';

export const EX_CONFIG = 78;

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  ${problems.join('\n  ')}`);
  }
}

/** Command-line flags that override the file (all optional). */
export interface ConfigOverrides {
  listen?: string;
  data_dir?: string;
  test_pack?: string;
  node_id?: string;
  capture?: string;
  ir?: string;
}

/** Read, merge and validate; throws ConfigError listing every problem. */
export function loadConfig(file: string | undefined, overrides: ConfigOverrides = {}): FarmConfig {
  let raw: Record<string, unknown> = {};
  if (file) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (e) {
      throw new ConfigError([`${file}: cannot read (${(e as NodeJS.ErrnoException).code ?? String(e)})`]);
    }
    try {
      const parsed: unknown = JSON.parse(text);
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
        throw new ConfigError([`${file}: must be a JSON object`]);
      }
      raw = parsed as Record<string, unknown>;
    } catch (e) {
      if (e instanceof ConfigError) throw e;
      throw new ConfigError([`${file}: not valid JSON (${(e as Error).message})`]);
    }
  }
  const merged = applyOverrides(raw, overrides, file ? path.dirname(path.resolve(file)) : process.cwd());
  const parsed = configSchema.safeParse(merged);
  if (!parsed.success) {
    throw new ConfigError(
      parsed.error.issues.map((i) => `${i.path.length ? i.path.join('.') : '(root)'}: ${i.message}`),
    );
  }
  const cfg = parsed.data;
  return {
    ...cfg,
    node_id: cfg.node_id ?? defaultNodeId(),
    data_dir: path.resolve(cfg.data_dir),
  };
}

function applyOverrides(raw: Record<string, unknown>, o: ConfigOverrides, baseDir: string): Record<string, unknown> {
  const out: Record<string, unknown> = { ...raw };
  if (o.listen !== undefined) out.listen = o.listen;
  if (o.data_dir !== undefined) out.data_dir = o.data_dir;
  if (o.node_id !== undefined) out.node_id = o.node_id;
  if (o.test_pack !== undefined) {
    const url = isLocalPath(o.test_pack) ? path.resolve(o.test_pack) : o.test_pack;
    out.test_pack = { ...asObject(raw.test_pack), url };
  }
  if (o.capture !== undefined) out.capture = { ...asObject(raw.capture), uri: o.capture };
  if (o.ir !== undefined) out.ir = { ...asObject(raw.ir), uri: o.ir };
  // A relative test-pack path in the file is relative to the file, like data_dir.
  const tp = asObject(out.test_pack);
  if (typeof tp.url === 'string' && isLocalPath(tp.url) && o.test_pack === undefined) {
    out.test_pack = { ...tp, url: path.resolve(baseDir, tp.url) };
  }
  // So is the portal's credential file.
  const portal = asObject(out.portal);
  if (typeof portal.node_credential_file === 'string' && portal.node_credential_file !== '') {
    out.portal = { ...portal, node_credential_file: path.resolve(baseDir, portal.node_credential_file) };
  }
  if (typeof out.data_dir === 'string' && o.data_dir === undefined) out.data_dir = path.resolve(baseDir, out.data_dir);
  return out;
}

const asObject = (v: unknown): Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};

const isLocalPath = (url: string) => !/^[a-z][a-z0-9+.-]*:\/\//i.test(url) && !/^[^/]+@[^/]+:/.test(url);

/** `farmhand-<12 hex digits of the first MAC address>` (DESIGN.md), `farmhand-000000000000` without one. */
export function defaultNodeId(): string {
  const macs = Object.values(networkInterfaces())
    .flat()
    .map((i) => i?.mac)
    .filter((m): m is string => !!m && m !== '00:00:00:00:00:00')
    .sort();
  return `farmhand-${(macs[0] ?? '00:00:00:00:00:00').replaceAll(':', '')}`;
}
