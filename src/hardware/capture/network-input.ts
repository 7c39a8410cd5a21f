/**
 * Network video (HDMI-over-IP encoders): `capture.uri` of udp://, srt://, rtsp:// or http(s)://
 * read by the same ffmpeg as a capture card. What differs from a card is here: the input options
 * (low latency, an I/O timeout so a dead stream ends ffmpeg instead of hanging it), the restart
 * schedule (a stream that restarts is back fast) and the reason given when ffmpeg ends.
 * See docs/capture.md, "Network video".
 */
import { parseNetworkCaptureUri, redactCaptureUri, type NetworkScheme } from '../../config/uris/capture.js';
import type { BackoffOptions } from './backoff.js';
import type { InputSpec } from './input-spec.js';
import type { ChildExit } from './ffmpeg-child.js';

export { isNetworkCaptureUri, redactCaptureUri } from '../../config/uris/capture.js';

/**
 * No data for this long ends ffmpeg (udp/srt/rtsp/http each have their own option for it). An encoder
 * sends without pause (25 frames a second, and MPEG-TS tables and PCR in between), so a second of
 * nothing is a stream that stopped; it is also how soon a killed sender on udp:// or srt:// (no FIN
 * to end the connection) is noticed.
 */
export const NETWORK_IO_TIMEOUT_MS = 1000;

/**
 * SRT's shorter I/O timeout. An SRT sender that restarts can never go on with the old connection (its
 * new listener does not know it), so every ms waited past the last packet is time before the reconnect;
 * udp has no connection, and a sender back within its timeout is read on by the same ffmpeg. Half a
 * second is still a dozen frames (and many more MPEG-TS packets) missing; the receiver's libsrt keeps
 * reading on a busy machine, so a late ffmpeg does not count against it.
 */
export const SRT_IO_TIMEOUT_MS = 500;

/**
 * Restarts of a network stream: the first at once (100 ms: an encoder that restarts on a mode change
 * is usually back within a second or two), doubling to 1 s, so a stream that comes back after any
 * outage is read again within 1 s plus the failing attempt's own time, ffmpeg's start and the
 * encoder's next keyframe; back to 100 ms once a stream has delivered frames for 2 s (it worked: its
 * next end is a new outage, such as the next mode change). A dead stream costs one ffmpeg start
 * (about 0.16 s of CPU) every ~1.5-2 s: each attempt ends on its own (connection refused, or the
 * I/O or connect timeout) and is followed by the 1 s wait. 1.5 s here put the worst return after an
 * outage at 3.3-4.1 s on a loaded 2-core box.
 */
export const NETWORK_BACKOFF: BackoffOptions = { initialMs: 100, maxMs: 1000, healthyResetMs: 2000 };

/**
 * Probe only what it takes to know the stream (a keyframe's size and format), not ffmpeg's default 5 s
 * of it: a restart is seen sooner. `-fpsprobesize 0`: the rate is not needed (frames are stamped on arrival).
 */
const PROBE = ['-probesize', '500000', '-analyzeduration', '300000', '-fpsprobesize', '0'];

/**
 * The input arguments for a network URI. Every stream gets `-fflags nobuffer` (no optional buffering)
 * and is stamped with the wall clock on arrival (`-use_wallclock_as_timestamps 1`, as `virtual:`): an
 * encoder that restarts starts its timestamps again from anywhere, and ffmpeg would drop every frame
 * "from the past" until they caught up; arrival time never goes back. The size may change mid-stream
 * (`resizes`): every output scales to the configured size.
 */
export function networkInputArgs(uri: string): InputSpec {
  const { scheme } = parseNetworkCaptureUri(uri);
  const us = String(NETWORK_IO_TIMEOUT_MS * 1000);
  return {
    args: ['-fflags', 'nobuffer', ...PROBE, '-use_wallclock_as_timestamps', '1', ...protocolArgs(scheme, us), '-i', uri],
    stdin: 'none',
    resizes: true,
  };
}

/** Each protocol's own timeout option (microseconds) and transport choices. */
function protocolArgs(scheme: NetworkScheme, us: string): string[] {
  switch (scheme) {
    case 'udp':
      // A full receive buffer (Node busy, ffmpeg blocked writing frames) loses packets, not the stream.
      return ['-timeout', us, '-overrun_nonfatal', '1'];
    case 'srt':
      // SRT runs over UDP: a caller gets no "connection refused" from a listener that is not up yet, only
      // the handshake's timeout (3 s by default), and every retry of a restarting encoder waited for it.
      return ['-timeout', String(SRT_IO_TIMEOUT_MS * 1000), '-connect_timeout', String(NETWORK_IO_TIMEOUT_MS)];
    case 'rtsp':
      // Interleaved over the RTSP connection: no UDP ports to open, no packets lost to a busy machine.
      return ['-rtsp_transport', 'tcp', '-timeout', us];
    case 'http':
    case 'https':
      return ['-rw_timeout', us];
  }
}

/** ffmpeg's decoder chatter: corrupt frames before the first keyframe, never the reason it ended. */
const NOISE = /^\[(h264|hevc|mpeg2video|mjpeg|NULL) @|Error while decoding stream|Last message repeated|non-existing PPS|error while decoding MB|corrupted macroblock/;
/** Lines that name the cause, preferred over the generic last line ("...: Input/output error"). */
const CAUSE = /Failed to resolve|Connection refused|Connection timed out|timed out|No route to host|Network is unreachable|Server returned|Unauthorized|Forbidden|Not Found|failed:|matches no streams|Invalid data found/i;

/**
 * Why ffmpeg ended on a network stream, for health and the log (credentials redacted): `no data for
 * N s` for udp's timeout, `stream ended` when the sender closed a connection (ffmpeg exits 0 at the end
 * of its input), otherwise ffmpeg's most telling line (the cause before the generic I/O error).
 */
export function networkExitReason(uri: string, exit: ChildExit, tail: readonly string[]): string | undefined {
  if (exit.error !== undefined || exit.signal !== null) return undefined; // not the stream's doing: describeExit says it
  const where = redactCaptureUri(uri);
  const lines = tail.map(redactCaptureUri).filter((l) => !NOISE.test(l));
  const last = lines.at(-1);
  // udp has no connection to end: its timeout is the only way ffmpeg learns the sender is gone (after
  // frames it ends as at the end of a file, code 0; before any, with an I/O error).
  if (uri.startsWith('udp:') && (exit.code === 0 || last === undefined || /Input\/output error$/.test(last))) {
    return `no data from ${where} for ${NETWORK_IO_TIMEOUT_MS / 1000} s (ffmpeg exited with code ${exit.code})`;
  }
  if (exit.code === 0) return `stream ended: ${where} stopped sending (ffmpeg exited with code 0)`;
  const cause = [...lines].reverse().find((l) => CAUSE.test(l)) ?? last;
  return cause === undefined ? undefined : `ffmpeg exited with code ${exit.code}: ${cause}`;
}
