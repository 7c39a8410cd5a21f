/**
 * The virtual set-top box: the device under test farmhand drives when no
 * hardware is configured (`capture.uri` and `ir.uri` both `virtual:`). It
 * receives IR trains from the VirtualTransport, decodes them with its own
 * LIRC remote, updates its state machine and feeds rendered frames into the
 * capture's ffmpeg, so presses and pictures take the same paths as on real
 * hardware.
 */
import type { Writable } from 'node:stream';
import type { Logger } from '../../core/ports.js';
import type { FrameFeed } from '../capture/index.js';
import { silentLogger } from '../../logger.js';
import type { LircRemote } from '../ir/lirc/index.js';
import type { VirtualIrListener } from '../ir/transports/virtual.js';
import { Animator, animationFor, type Truth } from './animations.js';
import { FrameCache, feedFrames, type FrameStats } from './frames.js';
import { KeyReceiver, RemoteDecoder, vstbRemote } from './remote.js';
import { clockText } from './render.js';
import { advanceTime, initialState, pressKey, viewOf, type StbState } from './state.js';

export { VSTB_LIRCD_CONF, VSTB_REMOTE_FILE, VSTB_REMOTE_NAME, vstbRemote, RemoteDecoder, KeyReceiver } from './remote.js';
export type { DecodedTrain } from './remote.js';
export { clockText, renderFrame, screenSvg } from './render.js';
export * from './state.js';
export type { FrameStats } from './frames.js';
export * from './animations.js';

export interface VirtualStbOptions {
  /** Frame size and rate: the `capture` section's `width`, `height`, `fps`. */
  width: number;
  height: number;
  fps: number;
  logger?: Logger;
  /** Wall-clock milliseconds (the on-screen clock and the box's timeouts); tests pass a fixed clock. */
  now?: () => number;
  /** The remote the box obeys; default vstb (VSTB_LIRCD_CONF). */
  remote?: LircRemote;
  /** Animations, frame numbers and the record of picture changes (animations.ts); default off. */
  animations?: boolean;
  /**
   * Frames a second written while the picture does not change (feedFrames): the rate of the capture's outputs that
   * need a steady input, its preview; default `fps` (every tick). Unused with `animations` (every frame is numbered).
   */
  stillFps?: number;
}

export interface VirtualStb {
  /** The capture's frame feed: pass as `createFrameSource(capture, logger, { feed })`. */
  feed: FrameFeed;
  /** Pass to `new VirtualTransport(listener)` or `transport.subscribe(listener)`. */
  transportListener: VirtualIrListener;
  /** The box's state now (for tests and diagnostics). */
  state(): StbState;
  /** The key held down now (stbt's `pressing`), if any. */
  heldKey(): string | undefined;
  /** The frame being fed now; undefined until the first render finished. */
  currentFrame(): Buffer | undefined;
  stats(): FrameStats;
  /** With `animations`: the frames whose picture changed and the keys obeyed; undefined without. */
  truth(): Truth | undefined;
  /**
   * The box's mains power (`power.uri` "virtual:", a test's `stbt.PDU`): with `on`, switch it and
   * return the new state; without, return it. Off is a black picture and no key obeyed (unlike
   * `KEY_POWER`'s standby, which the remote wakes); on again is a cold boot, the state it starts in.
   */
  mains(on?: boolean): boolean;
  /** Stop feeding every attached stdin and rendering; later key presses change nothing on screen. */
  stop(): void;
}

/** Build the box. Does no I/O until `feed` is called; renders its first frame at once. */
export function createVirtualStb(o: VirtualStbOptions): VirtualStb {
  const log = (o.logger ?? silentLogger).child({ device: 'virtual-stb' });
  const now = o.now ?? Date.now;
  const receiver = new KeyReceiver(new RemoteDecoder(o.remote ?? vstbRemote()), log);
  let state = initialState();
  const current = (): StbState => (state = advanceTime(state, now()));
  const cache = new FrameCache(o.width, o.height, () => {
    const t = now();
    const view = viewOf(current());
    // The clock only matters when something is on screen: standby re-renders nothing.
    return { view, clock: view.power ? clockText(t) : '' };
  }, log);
  const detachers = new Set<() => void>();
  const animator = o.animations ? new Animator(o.width, o.height, now) : undefined;

  let held: string | undefined;
  let mainsOn = true;

  const transportListener: VirtualIrListener = (event) => {
    if (event.hold === 'up') {
      log.debug({ key: held }, 'virtual set-top box: key up');
      held = undefined;
      return;
    }
    const key = receiver.receive(event.trains, event.key);
    if (key === undefined || !mainsOn) return;
    if (event.hold === 'down') held = key;
    const before = current();
    state = pressKey(before, key, now());
    animator?.keyObeyed(key, animationFor(before, state, key));
    log.debug({ key, page: state.page }, 'virtual set-top box: key');
    cache.refresh();
  };

  const feed: FrameFeed = (stdin: Writable) => {
    const stopFeeding = feedFrames(stdin, o.fps, cache, () => cache.refresh(), animator && ((f) => animator.frame(f)), o.stillFps);
    const detach = (): void => {
      stopFeeding();
      detachers.delete(detach);
    };
    detachers.add(detach);
    return detach;
  };

  const mains = (on?: boolean): boolean => {
    if (on === undefined || on === mainsOn) return mainsOn;
    mainsOn = on;
    held = undefined;
    // Off: nothing on screen; on: a cold boot (the channel and pages as the box starts).
    state = on ? initialState() : { ...initialState(), power: false };
    log.info({ on }, 'virtual set-top box: mains power');
    cache.refresh();
    return mainsOn;
  };

  cache.refresh();
  return {
    feed,
    transportListener,
    mains,
    state: current,
    heldKey: () => held,
    currentFrame: () => cache.current(),
    stats: () => ({ ...cache.stats }),
    truth: () => animator?.truth(),
    stop: () => {
      for (const d of [...detachers]) d();
      cache.stop();
    },
  };
}
