/**
 * Real Chromium for the portal's browser tests: Debian's `chromium` package
 * (scripts/setup.sh installs it), driven by playwright-core. Playwright's own
 * browser download is not used. One browser per test file; each test opens its
 * own context (cookies, storage), so two people are two contexts.
 */
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { fullLaneOnly } from './lane.js';

const CANDIDATES = [process.env.FARMHAND_CHROMIUM, '/usr/bin/chromium', '/usr/bin/chromium-browser'];

export function chromiumPath(): string {
  const found = CANDIDATES.find((p): p is string => !!p && existsSync(p));
  if (!found) throw new Error("no Chromium found: install Debian's chromium package (scripts/setup.sh does) or set FARMHAND_CHROMIUM");
  return found;
}

export async function launchBrowser(): Promise<Browser> {
  fullLaneOnly('Chromium (launchBrowser)');
  // --no-sandbox: the suite runs as root in CI, where Chromium's sandbox refuses to start.
  return chromium.launch({ executablePath: chromiumPath(), headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
}
