/**
 * `/app/live`: live video of the device under test, the web remote and
 * reference images (docs/portal.md, "Live view and web remote").
 *
 * - The page is also `/app/nodes/<node_id>/live`, and its picture and frames
 *   are read from there (`/app/nodes/<node_id>/live/stream.mjpeg`, `.../frame.png`):
 *   the farm's portal forwards that path to the node, so the same page works
 *   on the node and through the portal.
 * - `/app/live/stream.mjpeg`: the picture as Motion JPEG (LiveStream), which
 *   an `<img>` shows without JavaScript; live.js reads it with fetch and
 *   draws each frame into a canvas (a frame counter, a picture to drag on).
 * - `/app/live/frame.png`: one captured frame, lossless, whole or a
 *   rectangle of it: the full screenshot and the reference images.
 * - Presses go to `POST /api/v2/nodes/<id>/press` from the page, so the
 *   reservation rules of the API apply.
 * - A node with an outlet (`power.uri`) offers a "Power cycle" button to a
 *   reader whose role allows manual control, with a confirm step: it calls
 *   `POST /api/v2/nodes/<id>/power/cycle` (docs/power.md).
 */
import Router from '@koa/router';
import type { Context } from 'koa';
import { loadSharp } from '../../hardware/sharp.js';
import { FarmError, invalid } from '../../core/errors.js';
import type { Services } from '../../http/context.js';
import { permits } from '../../core/roles.js';
import { signedIn, userOf, viaPortal } from '../../http/auth.js';
import { sendPage } from '../layout.js';
import { isLiveFrameSource, LiveStream } from '../liveStream.js';
import { arrange, loadRemotes, type WebRemote } from '../liveRemote.js';
import { mount } from '../../http/endpoints/mount.js';

/** Viewers at once; each costs a socket and a copy of every frame's bytes. */
const MAX_VIEWERS = 32;
/** Reference image names: a file name without its `.png`. */
const NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$/;

/** The live view's path of a node, on the node and on the farm's portal alike. */
export const liveBaseOf = (nodeId: string): string => `/app/nodes/${encodeURIComponent(nodeId)}/live`;

export function liveRouter(s: Services): Router {
  const r = new Router();
  const stream = isLiveFrameSource(s.frames) ? new LiveStream(s.frames, { maxViewers: MAX_VIEWERS, logger: s.logger }) : undefined;
  const mine = liveBaseOf(s.nodeId);
  /** The node-scoped paths name this node; another node's id is a 404 (the portal routes by it). */
  const paths = (tail: string): string[] => [`GET /app/live${tail}`, `GET /app/nodes/:node_id/live${tail}`];
  const checkNode = async (ctx: Context, next: () => Promise<unknown>): Promise<void> => {
    const id = (ctx.params as Record<string, string | undefined>).node_id;
    if (id !== undefined && id !== s.nodeId) throw new FarmError('not_found', `this is node ${s.nodeId}, not ${id}: its live view is ${mine}`);
    await next();
  };

  mount(r, paths(''), checkNode, async (ctx) => {
    const revision = s.jobs.current()?.test_pack_sha ?? 'HEAD';
    const remotes = await loadRemotes(s.testPack, revision);
    const size = frameSize(s);
    sendPage(
      ctx,
      <LivePage nodeId={s.nodeId} base={mine} signedIn={signedIn(ctx)} remotes={remotes.remotes} chosen={remotes.chosen} problem={remotes.problem} width={size.width} height={size.height} capture={stream !== undefined} power={powerOffer(ctx, s)} />,
      { title: 'Live view', section: 'live', scripts: ['live.js'] },
    );
  });

  mount(r, paths('/stream.mjpeg'), checkNode, (ctx) => {
    if (!stream) throw new FarmError('device_unavailable', 'this node has no capture (capture.uri is none:): there is no picture to show');
    if (stream.full) {
      ctx.set('Retry-After', '10');
      throw new FarmError('device_unavailable', `too many live viewers (${MAX_VIEWERS}); close one and retry`);
    }
    ctx.status = 200;
    if (ctx.method === 'HEAD') {
      ctx.type = 'multipart/x-mixed-replace';
      return;
    }
    ctx.respond = false;
    stream.add(ctx.res);
  });

  mount(r, paths('/frame.png'), checkNode, async (ctx) => {
    const name = one(ctx, 'name');
    if (name !== undefined && !NAME.test(name)) {
      throw invalid('name: letters, digits, _ . - (up to 64, not starting with . or -); it becomes <name>.png');
    }
    const frame = s.frames.latestFrame?.();
    if (!frame) throw new FarmError('device_unavailable', `capture is offline: ${s.frames.health().reason ?? 'no frame yet'}`);
    const region = regionOf(ctx, frame.width, frame.height);
    const sharp = await loadSharp();
    let img = sharp(frame.data, { raw: { width: frame.width, height: frame.height, channels: 3 } });
    if (region) img = img.extract({ left: region.x, top: region.y, width: region.width, height: region.height });
    const png = await img.png({ compressionLevel: 1 }).toBuffer();
    ctx.type = 'image/png';
    ctx.set('Cache-Control', 'no-store');
    if (frame.seq !== undefined) ctx.set('X-Frame-Seq', String(frame.seq));
    if (name !== undefined) ctx.set('Content-Disposition', `attachment; filename="${name}.png"`);
    ctx.body = png;
  });

  return r;
}

/**
 * The power-cycle offered on the page: the node has an outlet and the reader is signed in with a role that allows
 * manual control (none: a node without roles). Through the portal the node is told only that she is signed in, so
 * the page asks the portal's session (live.js) before showing the button.
 */
function powerOffer(ctx: Context, s: Services): PowerOffer | undefined {
  if (!s.power || !signedIn(ctx)) return undefined;
  const role = userOf(ctx)?.role;
  if (role !== undefined && !permits(role, 'manual')) return undefined;
  return { offSecs: s.power.outlet.offSecs, askPortal: viaPortal(ctx) && userOf(ctx) === undefined };
}

function frameSize(s: Services): { width: number; height: number } {
  const f = s.frames.latestFrame?.();
  return f ? { width: f.width, height: f.height } : { width: 1280, height: 720 };
}

function one(ctx: Context, key: string): string | undefined {
  const v = ctx.query[key];
  if (Array.isArray(v)) throw invalid(`${key}: give it once`);
  return v === undefined || v === '' ? undefined : v;
}

/** `x`, `y`, `width`, `height` in frame pixels, all or none; inside the frame. */
function regionOf(ctx: Context, fw: number, fh: number): { x: number; y: number; width: number; height: number } | undefined {
  const raw = (['x', 'y', 'width', 'height'] as const).map((k) => one(ctx, k));
  if (raw.every((v) => v === undefined)) return undefined;
  const [x, y, width, height] = raw.map((v) => (v !== undefined && /^\d{1,5}$/.test(v) ? Number(v) : NaN)) as [number, number, number, number];
  if ([x, y, width, height].some((n) => Number.isNaN(n)) || width < 1 || height < 1 || x + width > fw || y + height > fh) {
    throw invalid(`x, y, width, height: whole pixels, all four, a rectangle inside the ${fw}x${fh} frame (width and height at least 1)`);
  }
  return { x, y, width, height };
}

interface PowerOffer {
  /** The outlet's default off time (power.uri's off_secs). */
  offSecs: number;
  /** Shown only once the portal's session says the reader's role allows manual control (live.js). */
  askPortal: boolean;
}

interface LivePageProps {
  nodeId: string;
  /** `/app/nodes/<id>/live`: where the picture and frames are read. */
  base: string;
  signedIn: boolean;
  remotes: WebRemote[];
  chosen: string | null;
  problem: string | undefined;
  width: number;
  height: number;
  capture: boolean;
  power: PowerOffer | undefined;
}

function LivePage(p: LivePageProps) {
  return (
    <div id="live" class="live" data-node-id={p.nodeId} data-width={String(p.width)} data-height={String(p.height)} data-signed-in={p.signedIn ? 'yes' : 'no'} data-live-base={p.base}>
      <h1>Live view</h1>
      <div class="live-layout">
        <section class="live-video" aria-labelledby="live-video-title">
          <h2 id="live-video-title" class="visually-hidden">
            Picture
          </h2>
          {p.capture ? (
            <div class="live-frame" id="live-frame">
              <img id="live-img" src={`${p.base}/stream.mjpeg`} width={p.width} height={p.height} alt="Live picture of the device under test" />
              <div id="live-rect" class="live-rect" hidden />
            </div>
          ) : (
            <p class="problem">This node has no capture (capture.uri is none:): there is no picture to show.</p>
          )}
          <p id="live-status" class="live-status" aria-live="off">
            Live picture ({p.width}x{p.height}).
          </p>
          <div class="panel live-tools">
            <p>
              <a id="live-screenshot" href={`${p.base}/frame.png?name=screenshot`} download="screenshot.png">
                Save a full screenshot
              </a>{' '}
              (PNG, the exact pixels of one captured frame).
            </p>
            <p id="ref-help">Drag a rectangle on the picture to save that part as a reference image.</p>
            <form id="ref-form" class="ref-form" hidden>
              <label>
                Name <input id="ref-name" name="name" value="reference" pattern="[A-Za-z0-9_][A-Za-z0-9_.\-]{0,63}" required />
                .png
              </label>{' '}
              <span id="ref-region" />{' '}
              <a id="ref-download" href="#" download="reference.png">
                Save reference image
              </a>
              <p>Use it in a test:</p>
              <pre>
                <code id="ref-python" />
              </pre>
            </form>
          </div>
        </section>
        <section class="live-remote" aria-labelledby="remote-title">
          <h2 id="remote-title">Remote control</h2>
          {p.signedIn ? null : (
            <p class="live-signin">
              <a href={`/app/sign-in?next=${encodeURIComponent(p.base)}`}>Sign in</a> to use the remote.
            </p>
          )}
          {p.problem ? <p class="problem">{p.problem}</p> : null}
          {p.remotes.length > 1 ? (
            <p>
              <label>
                Remote{' '}
                <select id="remote-picker">
                  {p.remotes.map((r) => (
                    <option value={r.name} selected={r.name === p.chosen}>
                      {r.name}
                    </option>
                  ))}
                </select>
              </label>
            </p>
          ) : null}
          {p.remotes.map((r) => (
            <RemoteKeys remote={r} shown={r.name === p.chosen} enabled={p.signedIn} />
          ))}
          <p id="remote-error" class="problem" role="alert" />
          {p.power ? <PowerPanel power={p.power} /> : null}
          <details class="live-keys-help">
            <summary>Keyboard</summary>
            <p>With the focus anywhere on this page but a text box:</p>
            <ul>
              <li>arrows: up, down, left, right; Enter: OK; Backspace: BACK</li>
              <li>0-9: digits; m: MENU; i: INFO; p: POWER</li>
              <li>Page Up / Page Down: channel up / down; + / -: volume up / down; Space: play/pause</li>
            </ul>
          </details>
        </section>
      </div>
    </div>
  );
}

/** The power-cycle button, its confirm step and its outcome (live.js). */
function PowerPanel(p: { power: PowerOffer }) {
  return (
    <div id="power-panel" class="panel live-power" data-off-secs={String(p.power.offSecs)} data-ask-portal={p.power.askPortal ? 'yes' : 'no'} hidden={p.power.askPortal}>
      <h3>Power</h3>
      <p>Switch the device's mains off for {p.power.offSecs} s and on again, through the node's outlet.</p>
      <button type="button" id="power-cycle">
        Power cycle
      </button>
      <p id="power-confirm" hidden>
        Switch the device off, and on again after {p.power.offSecs} s? It starts from cold.{' '}
        <button type="button" id="power-yes">
          Yes, power-cycle
        </button>{' '}
        <button type="button" id="power-no">
          Cancel
        </button>
      </p>
      <p id="power-status" role="status" />
    </div>
  );
}

function RemoteKeys(p: { remote: WebRemote; shown: boolean; enabled: boolean }) {
  const { rows, others } = arrange(p.remote.keys);
  return (
    <div class="remote" data-remote={p.remote.name} hidden={!p.shown}>
      <div class="remote-pad">
        {rows.map((row) => (
          <div class="remote-row">
            {row.map(({ key, button }) => (
              <button type="button" data-key={key} aria-label={`${button.name} (${key})`} title={key} disabled={!p.enabled}>
                {button.label}
              </button>
            ))}
          </div>
        ))}
      </div>
      {others.length > 0 ? (
        <details class="remote-others">
          <summary>Other keys ({others.length})</summary>
          <ul>
            {others.map((key) => (
              <li>
                <button type="button" data-key={key} disabled={!p.enabled}>
                  {key}
                </button>
              </li>
            ))}
          </ul>
        </details>
      ) : null}
      {p.remote.keys.length === 0 ? <p>This remote file defines no keys.</p> : null}
    </div>
  );
}
