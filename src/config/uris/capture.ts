/**
 * The config's `capture.uri`: which picture the node sees (src/hardware/capture, docs/capture.md).
 *
 *   testsrc:                                   ffmpeg's test pattern (the default)
 *   v4l2:/dev/videoN                           a V4L2 capture card
 *   virtual:                                   the virtual set-top box
 *   none:                                      no capture (always offline)
 *   udp://[@]host:port[?opts]                  MPEG-TS over UDP (unicast, or multicast with the group as host)
 *   srt://host:port[?opts]                     SRT (caller by default; `?mode=listener` waits for the encoder)
 *   rtsp://[user:pass@]host[:port]/path        RTSP (interleaved over TCP)
 *   http(s)://[user:pass@]host[:port]/path     a stream over HTTP (MPEG-TS, MJPEG, ...)
 *
 * The network forms (HDMI-over-IP encoders) go to ffmpeg as written; `?opts` of udp:// and srt:// are
 * ffmpeg's protocol options (e.g. `localaddr`, `latency`, `passphrase`). A URI that does not parse is
 * refused when the configuration loads, with the reason; credentials never appear in a message.
 */
import { z } from 'zod';

export type NetworkScheme = 'udp' | 'srt' | 'rtsp' | 'http' | 'https';

export interface NetworkCaptureUri {
  scheme: NetworkScheme;
  host: string;
  port: number;
}

const NETWORK_SCHEMES: readonly NetworkScheme[] = ['udp', 'srt', 'rtsp', 'http', 'https'];
const DEFAULT_PORT: Partial<Record<NetworkScheme, number>> = { rtsp: 554, http: 80, https: 443 };
const LOCAL_FORMS = /^(testsrc:|v4l2:\/dev\/[\w./-]+|virtual:|none:)$/;

/** The grammar's one-line summary, for error messages. */
export const CAPTURE_URI_FORMS =
  'testsrc:, v4l2:/dev/videoN, virtual:, none:, udp://host:port, srt://host:port, rtsp://[user:pass@]host[:port]/path, http(s)://[user:pass@]host[:port]/path';

/** True for the network forms (udp, srt, rtsp, http, https), whatever else is wrong with the URI. */
export function isNetworkCaptureUri(uri: string): boolean {
  const scheme = /^([a-z]+):\/\//.exec(uri)?.[1];
  return scheme !== undefined && (NETWORK_SCHEMES as readonly string[]).includes(scheme);
}

/**
 * Parse a network `capture.uri`; throws an Error saying what is wrong and what to write instead.
 * The local forms (testsrc:, v4l2:, virtual:, none:) are checked by {@link captureUri}.
 */
export function parseNetworkCaptureUri(uri: string): NetworkCaptureUri {
  if (!isNetworkCaptureUri(uri)) throw new Error(`unknown capture.uri; use one of: ${CAPTURE_URI_FORMS}`);
  // ffmpeg is given the URI as one argument: nothing it could read as another option or a second URL.
  if (/\s/.test(uri) || [...uri].some((c) => c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f)) throw new Error('capture.uri must not contain spaces or control characters (percent-encode them)');
  let u: URL;
  try {
    u = new URL(uri);
  } catch {
    throw new Error('capture.uri is not a valid URI; expected scheme://host:port...');
  }
  const scheme = u.protocol.slice(0, -1) as NetworkScheme;
  const host = u.hostname.replace(/^\[(.*)\]$/, '$1');
  if (host === '') throw new Error(`${scheme}:// needs a host`);
  const port = u.port === '' ? DEFAULT_PORT[scheme] : Number(u.port);
  if (port === undefined || port === 0) throw new Error(`${scheme}:// needs a port, e.g. ${scheme}://${u.host || '239.0.0.1'}:5000`);
  if ((scheme === 'udp' || scheme === 'srt') && (u.username !== '' || u.password !== '')) {
    throw new Error(`${scheme}:// takes no user:password@${scheme === 'srt' ? ' (SRT encryption: ?passphrase=...)' : ''}`);
  }
  if ((scheme === 'udp' || scheme === 'srt') && u.pathname !== '' && u.pathname !== '/') {
    throw new Error(`${scheme}:// takes no path: ${scheme}://host:port[?options]`);
  }
  return { scheme, host, port };
}

/**
 * `text` with every URI's `user:password@` and every `passphrase=` value replaced by `***`: what logs,
 * health reasons and error messages show (ffmpeg writes its input URL into its own error lines).
 */
export function redactCaptureUri(text: string): string {
  return text
    .replace(/\b([a-z][a-z0-9+.-]*:\/\/)[^/@?#\s]*@/gi, '$1***@')
    .replace(/([?&](?:passphrase|password)=)[^&\s]*/gi, '$1***');
}

/** `testsrc:`, `v4l2:/dev/videoN`, `virtual:`, `none:` or one of the network forms above. */
export const captureUri = z
  .string()
  .superRefine((v, ctx) => {
    if (LOCAL_FORMS.test(v)) return;
    try {
      parseNetworkCaptureUri(v);
    } catch (e) {
      ctx.addIssue({ code: 'custom', message: `${(e as Error).message} (capture.uri ${JSON.stringify(redactCaptureUri(v))})` });
    }
  })
  .default('testsrc:');
