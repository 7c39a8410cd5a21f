/**
 * The live view's picture in a browser test: a small signature of the canvas
 * (32x18 averaged pixels of everything below the top 15%, where the virtual
 * box's clock ticks) and waits on it, synchronised on the page, never on time.
 */
import type { Page } from 'playwright-core';
import { waitFor } from './wait.js';

const WAIT = { timeout: 30_000 };

export function signature(page: Page): Promise<string> {
  return page.evaluate(() => {
    const c = document.getElementById('live-canvas') as HTMLCanvasElement;
    const small = document.createElement('canvas');
    small.width = 32;
    small.height = 18;
    const top = Math.round(c.height * 0.15);
    const ctx = small.getContext('2d', { willReadFrequently: true })!;
    ctx.drawImage(c, 0, top, c.width, c.height - top, 0, 0, 32, 18);
    return Array.from(ctx.getImageData(0, 0, 32, 18).data).join(',');
  });
}

/** Until the page has drawn at least `atLeast` frames. */
export async function framesShown(page: Page, atLeast: number): Promise<void> {
  await page.waitForFunction((n) => Number(document.getElementById('live-canvas')?.dataset.frames ?? 0) >= n, atLeast, WAIT);
}

/** Until the picture's signature differs from `before` (polled: the page draws at its own pace). */
export async function pictureChangesFrom(page: Page, before: string): Promise<void> {
  await waitFor(async () => (await signature(page)) !== before, { what: 'the live picture to change', timeoutMs: WAIT.timeout, maxIntervalMs: 100 });
}
