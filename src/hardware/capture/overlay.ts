/**
 * `stbt.draw_text`: texts drawn on the recorded video and the live view, never
 * on the frames a test script sees (the preview output has no filter).
 *
 * The texts being shown live here, each with the time it ends. ffmpeg's
 * `drawtext` filter on the recording and live outputs reads them from one
 * text file (`reload=1`: again on every frame), which this class replaces
 * atomically (a temporary file renamed over it, as drawtext's documentation
 * asks: a half-written file would be drawn half) whenever a text is added or
 * one ends. The file is created (empty) before ffmpeg first starts and stays
 * for the daemon's life, so a respawned ffmpeg draws the same texts on.
 *
 * What a script passes is only ever the file's content: never part of the
 * filter string (no escaping to get wrong) and never a path. drawtext's
 * `%{...}` expansion is off, and control characters (a newline would split a
 * text into lines) become spaces.
 *
 * Stacking (stb-tester's documentation is silent): one line per text, oldest
 * at the top, newest at the bottom, each shown for its own duration; at most
 * MAX_LINES at once (the oldest of more are not drawn, still kept until they
 * end), each cut at MAX_CHARS.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

/** DejaVu Sans from Debian's fonts-dejavu-core (scripts/setup.sh installs it). */
export const DEFAULT_OVERLAY_FONT = '/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf';
/** Lines drawn at once; older texts past this are not drawn (the newest are). */
export const MAX_LINES = 8;
/** Characters of one text drawn; the rest is cut (a line longer than the picture is clipped at its edge anyway). */
export const MAX_CHARS = 200;
/** The longest duration kept (a day): a bigger or infinite one is this. */
const MAX_DURATION_MS = 24 * 3600 * 1000;

/**
 * One text as drawn: control characters (C0, DEL, C1, and the line and paragraph separators) become spaces,
 * then it is cut to MAX_CHARS characters (whole code points).
 */
export function overlayLine(text: string): string {
  const clean = text.replace(/[\p{Cc}\u2028\u2029]/gu, ' ');
  const chars = [...clean];
  return chars.length > MAX_CHARS ? chars.slice(0, MAX_CHARS).join('') : clean;
}

/**
 * A value for one option of an ffmpeg filter inside a filtergraph (`-vf`): both levels of ffmpeg's
 * escaping ("Notes on filtergraph escaping"): `\ ' :` for the option, then `\ ' [ ] , ;` for the graph.
 */
export function filterValue(v: string): string {
  const option = v.replace(/[\\':]/g, (c) => `\\${c}`);
  return option.replace(/[\\'[\],;]/g, (c) => `\\${c}`);
}

/**
 * The drawtext filter for a picture `height` pixels high: the text file's lines at the top left, white on a
 * dark translucent box, sizes in proportion to the height (720p: 30 px text, 18 px from the corner).
 */
export function drawtextFilter(o: { file: string; font: string; height: number }): string {
  const px = (f: number) => String(Math.max(1, Math.round(o.height * f)));
  return [
    `drawtext=fontfile=${filterValue(o.font)}`,
    `textfile=${filterValue(o.file)}`,
    'reload=1',
    'expansion=none',
    `fontsize=${px(1 / 24)}`,
    'fontcolor=white',
    `line_spacing=${px(1 / 120)}`,
    `x=${px(1 / 40)}`,
    `y=${px(1 / 40)}`,
    'box=1',
    'boxcolor=black@0.65',
    `boxborderw=${px(1 / 90)}`,
  ].join(':');
}

interface Shown {
  text: string;
  /** When it ends: `now()` milliseconds. */
  until: number;
  /** Who drew it (a run's control channel): `clear(owner)` takes its texts away. */
  owner: unknown;
}

export interface TextOverlayOptions {
  /** The text file drawtext reads; its folder is created. */
  file: string;
  /** Monotonic milliseconds; default performance.now. */
  now?: () => number;
  /** Called when writing the file failed (the texts on the video stay as they were until the next write). */
  onError?: (e: unknown) => void;
}

export class TextOverlay {
  private shown: Shown[] = [];
  private timer: NodeJS.Timeout | undefined;
  /** When the timer fires (`now()` ms). */
  private timerAt = Infinity;
  /** Writes, one after another: each writes the state of when it runs, so the last write is the latest state. */
  private writing: Promise<void> = Promise.resolve();
  private pending = false;
  private closed = false;
  private readonly now: () => number;

  constructor(private readonly o: TextOverlayOptions) {
    this.now = o.now ?? (() => performance.now());
  }

  get file(): string {
    return this.o.file;
  }

  /**
   * Create the folder, delete temporaries a crash left there, and write the file with the texts of now (empty
   * at first); rejects when it cannot.
   */
  async prepare(): Promise<void> {
    const dir = dirname(this.o.file);
    await mkdir(dir, { recursive: true });
    const prefix = `.${basename(this.o.file)}.`;
    const stale = (await readdir(dir)).filter((f) => f.startsWith(prefix) && f.endsWith('.tmp'));
    await Promise.all(stale.map((f) => rm(join(dir, f), { force: true })));
    await this.writeNow();
  }

  /**
   * Show `text` for `durationSecs` from now (a duration of 0 or less, or not a number, shows nothing). Resolves
   * once the file says so (ffmpeg draws it from its next frame); never rejects.
   */
  show(text: string, durationSecs: number, owner?: unknown): Promise<void> {
    if (this.closed) return Promise.resolve();
    const ms = Number.isNaN(durationSecs) ? 0 : Math.min(durationSecs * 1000, MAX_DURATION_MS);
    if (ms <= 0) return Promise.resolve();
    this.shown.push({ text: overlayLine(text), until: this.now() + ms, owner });
    return this.changed();
  }

  /** Take away the texts `owner` drew (its run ended); resolves once the file says so. */
  clear(owner: unknown): Promise<void> {
    const before = this.shown.length;
    this.shown = this.shown.filter((s) => s.owner !== owner);
    return this.shown.length === before ? this.writing : this.changed();
  }

  /** The lines drawn now, top to bottom. */
  lines(): string[] {
    const now = this.now();
    return this.shown.filter((s) => s.until > now).slice(-MAX_LINES).map((s) => s.text);
  }

  /** What the file holds now: the lines, one a line, no final newline (drawtext would draw an empty line's box). */
  content(): string {
    return this.lines().join('\n');
  }

  /** Stop the expiry timer and take no more texts; resolves after the last write. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.writing;
  }

  /** Drop the ended texts, re-arm the timer, and queue a write. */
  private changed(): Promise<void> {
    const now = this.now();
    this.shown = this.shown.filter((s) => s.until > now);
    this.arm();
    if (this.pending) return this.writing;
    this.pending = true;
    this.writing = this.writing.then(async () => {
      this.pending = false;
      await this.writeNow().catch((e: unknown) => this.o.onError?.(e));
    });
    return this.writing;
  }

  /** The timer for the soonest end. */
  private arm(): void {
    const next = Math.min(...this.shown.map((s) => s.until));
    if (next === this.timerAt && this.timer !== undefined) return;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = next;
    if (!Number.isFinite(next) || this.closed) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.timerAt = Infinity;
      void this.changed();
    }, Math.max(0, next - this.now()));
    this.timer.unref();
  }

  /** Replace the file: a new temporary file beside it, renamed over it (no fsync: nothing to keep after a crash). */
  private async writeNow(): Promise<void> {
    const tmp = join(dirname(this.o.file), `.${basename(this.o.file)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
    try {
      await writeFile(tmp, this.content(), { flag: 'wx', mode: 0o644 });
      await rename(tmp, this.o.file);
    } catch (e) {
      await rm(tmp, { force: true });
      throw e;
    }
  }
}
