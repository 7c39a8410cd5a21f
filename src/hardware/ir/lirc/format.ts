/**
 * Trains as text, exactly as LIRC's file driver writes them into irsimsend's
 * `simsend.out`: one `pulse N` / `space N` line per duration, then
 * `space <gap>` after each train.
 */
import type { IrTrain } from './types.js';

/** The `simsend.out` text `irsimsend` would write for these trains. */
export function formatIrsimsend(trains: readonly IrTrain[]): string {
  const lines: string[] = [];
  for (const t of trains) {
    t.durations.forEach((d, i) => lines.push(`${i % 2 ? 'space' : 'pulse'} ${d}`));
    lines.push(`space ${t.gap}`);
  }
  return lines.map((l) => `${l}\n`).join('');
}
