/**
 * What the phases of the daemon's start-up (src/daemon.ts) share, and the
 * first of them that open devices: the test pack, the virtual set-top box,
 * capture (built here, started with the live parts), the IR transport, the
 * test runner and the control server test scripts talk to.
 */
import path from 'node:path';
import type { FarmConfig } from '../config/schema.js';
import type { EventHub } from '../core/events.js';
import type { NodeService } from '../core/node.js';
import type { Logger } from '../core/ports.js';
import { announcePresses } from '../core/remoteControl.js';
import type { PortalLink } from '../farm/link/index.js';
import { createCapture, FfmpegFrameSource } from '../hardware/capture/index.js';
import { liveSize, previewRate } from '../hardware/capture/ffmpeg-frame-source.js';
import { KeyPresser } from '../hardware/ir/keys.js';
import { createIrTransport } from '../hardware/ir/transports/index.js';
import { createPowerOutlet, type PowerOutlet } from '../hardware/power/index.js';
import { createVirtualStb } from '../hardware/virtual/index.js';
import type { EventStream } from '../http/events.js';
import { observeIrTransport, type FarmMetrics } from '../metrics/index.js';
import type { WebhookDispatcher } from '../notify/webhooks.js';
import { ControlServer } from '../runner/control.js';
import { GitTestPack } from '../runner/gitTestPack.js';
import { ProcessTestRunner } from '../runner/testRunner.js';
import type { TestUser } from '../runner/testUser.js';
import type { ResourceStack } from '../service/resources.js';
import type { FileResultRepository } from '../storage/results/index.js';
import { runTempPrefixes } from '../storage/sweep.js';
import { projectRoot, version } from '../version.js';
import type { SweepReport } from './background.js';
import type { HttpServer, StartSecrets } from './startup.js';

/** What is wired after it is built: read lazily by what was built before it (metrics, the results' close). */
export interface Late {
  node?: NodeService;
  stream?: EventStream;
  portalLink?: PortalLink;
  swept?: Promise<SweepReport | undefined>;
  runningResult?: () => string | null;
  results?: FileResultRepository;
  webhooks?: WebhookDispatcher;
  captureStats?: () => ReturnType<FfmpegFrameSource['stats']>;
}

/** What every phase of start-up builds on. */
export interface Base {
  cfg: FarmConfig;
  logger: Logger;
  stack: ResourceStack;
  late: Late;
  secrets: StartSecrets;
  testUser: TestUser | undefined;
  http: HttpServer;
  metrics: FarmMetrics;
}

/** The test pack, the device (the virtual box, capture, IR) and what a test run talks to. */
export async function openDevices(b: Base & { hub: EventHub }) {
  const { cfg, logger, stack } = b;
  const testPack = new GitTestPack({
    url: cfg.test_pack.url,
    dir: path.join(cfg.data_dir, 'test-pack.git'),
    worktreesDir: path.join(cfg.data_dir, 'checkouts'),
    refreshAfterSecs: cfg.test_pack.refresh_secs,
    pollSecs: cfg.test_pack.poll_secs,
    logger: logger.child({ module: 'test-pack' }),
  });
  stack.defer('test pack', () => testPack.close());
  // An unreachable URL is not fatal: open() logs it and keeps retrying in the background.
  await testPack.open();
  const device = await openDevice(b);
  const keys = new KeyPresser({ testPack, transport: device.ir, logger: logger.child({ module: 'keys' }) });
  return { testPack, keys, ...device, ...(await openRunner(b, keys, device.frames, device.power, device.outlets)) };
}

/** The virtual set-top box, capture (built here, started with the live parts), the IR transport and the outlet. */
async function openDevice(b: Base) {
  const { cfg, logger, stack } = b;
  // The virtual set-top box is the picture (capture virtual:), what the IR reaches (ir virtual:) and what the
  // outlet feeds (power virtual:).
  const virtual = cfg.capture.uri === 'virtual:' || cfg.ir.uri === 'virtual:' || cfg.power.uri === 'virtual:';
  const stb = virtual
    ? await stack.open('virtual set-top box', () => {
        // A still picture is fed at the rate of the capture's preview output (its only output that needs a steady input).
        const stillFps = liveSize(cfg.capture) ? cfg.capture.preview_fps : previewRate(cfg.capture);
        const s = createVirtualStb({
          width: cfg.capture.width,
          height: cfg.capture.height,
          fps: cfg.capture.fps,
          stillFps,
          animations: cfg.capture.virtual_animations,
          logger: logger.child({ module: 'virtual-stb' }),
        });
        return { value: s, close: () => s.stop() };
      })
    : undefined;
  const { record_video: recordVideo, first_frame_wait_secs: _wait, virtual_animations: _animations, ...captureCfg } = cfg.capture;
  const { frames, video } = createCapture(captureCfg, logger.child({ module: 'capture' }), {
    ...(stb && { feed: stb.feed }),
    ...(recordVideo && { recording: { dir: path.join(cfg.data_dir, 'recording') } }),
    // stbt.draw_text's texts, drawn on the recording and the live view (overlay.ts).
    overlay: { file: path.join(cfg.data_dir, 'capture', 'draw-text.txt') },
  });
  if (frames instanceof FfmpegFrameSource) b.late.captureStats = () => frames.stats();
  const ir = await stack.open('IR transport', () => {
    const t = observeIrTransport(createIrTransport(cfg.ir.uri, { logger: logger.child({ module: 'ir' }), python: cfg.runner.python, ...(stb && { onVirtualEvent: stb.transportListener }) }), b.metrics);
    return { value: t, close: () => t.close() };
  });
  const power = createPowerOutlet(cfg.power.uri, { ...(stb && { virtualStb: stb }) });
  // power.outlets: network PDUs only (the schema refuses `none` and `virtual:`), so each makes an outlet.
  const outlets = new Map(Object.entries(cfg.power.outlets).flatMap(([name, uri]) => {
    const outlet = createPowerOutlet(uri);
    return outlet ? [[name, outlet] as const] : [];
  }));
  const noCapture = cfg.capture.uri === 'none:';
  const online = () => (noCapture ? { online: true, reason: null } : frames.health());
  return { stb, frames, video, ir, power, outlets, noCapture, online };
}

/** The runner of test processes and the control server their scripts talk to. */
async function openRunner(
  b: Base & { hub: EventHub },
  keys: KeyPresser,
  frames: ReturnType<typeof createCapture>['frames'],
  power: PowerOutlet | undefined,
  outlets: ReadonlyMap<string, PowerOutlet>,
) {
  const { cfg, logger, testUser } = b;
  // Named with the data directory's tag, so the sweep after start finds what a crash left of this node's runs.
  const tempPrefixes = runTempPrefixes(cfg.data_dir);
  const runner = new ProcessTestRunner({
    tmpPrefix: tempPrefixes.run,
    python: cfg.runner.python,
    pythonPath: path.join(projectRoot, 'python'),
    killGraceSecs: cfg.runner.kill_grace_secs,
    maxOutputBytes: cfg.runner.max_output_bytes,
    version,
    logger: logger.child({ module: 'runner' }),
    ...(testUser && { testUser }),
    nodeId: cfg.node_id,
  });
  // A test script's presses are announced as key.pressed, with the run that pressed them.
  const scriptKeys = {
    press: announcePresses(keys.press.bind(keys), b.hub, () => ({ source: 'script', username: null, result_id: b.late.runningResult?.() ?? null })),
    transportUri: keys.transportUri,
  };
  const control = await b.stack.open('control server', () => {
    const c = new ControlServer({
      keys: scriptKeys,
      logger,
      // A test script's frames at `capture.preview_fps`, whatever rate the live view gets (`live_fps`).
      latestFrame: () => (frames instanceof FfmpegFrameSource ? frames.latestPreviewFrame() : frames.latestFrame?.()),
      ...(testUser && { group: testUser.gid }),
      ...(power && { power }),
      outlets,
      tmpPrefix: tempPrefixes.control,
      ...(frames instanceof FfmpegFrameSource && { onFrames: (listener: () => void) => frames.onPreviewFrames(listener) }),
      // stbt.draw_text on the video; `none:` has no ffmpeg: the run's log only.
      ...(frames instanceof FfmpegFrameSource && {
        overlay: { show: (text: string, secs: number, owner: unknown) => frames.drawText(text, secs, owner), clear: (owner: unknown) => frames.clearText(owner) },
      }),
    });
    return { value: c, close: () => c.close() };
  });
  return { tempPrefixes, runner, control };
}

export type Devices = Awaited<ReturnType<typeof openDevices>>;
