/**
 * sharp (libvips), loaded on first use: it adds ~26 MiB of resident memory
 * to the process, which a node without capture, live view or the virtual
 * box never needs (issue 23: memory with a long history).
 */
import type sharpFn from 'sharp';

let loaded: Promise<typeof sharpFn> | undefined;

/** The `sharp` function; the module is imported once, at the first call. */
export function loadSharp(): Promise<typeof sharpFn> {
  return (loaded ??= import('sharp').then((m) => m.default));
}
