/**
 * The daemon's configuration: one JSON file, validated at start with every
 * problem listed (`path: message`). Every field has a default except the test
 * pack, so a config file can be as small as `{"test_pack": {"url": "..."}}`.
 */
import { z } from 'zod';
import { EVENT_TYPES } from '../core/events.js';
import { oidcSchema } from './oidc.js';
import { captureUri } from './uris/capture.js';
import { irUri } from './uris/ir.js';
import { powerOutlets, powerUri } from './uris/power.js';

const hostPort = z
  .string()
  .regex(/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, 'must be host:port, e.g. 127.0.0.1:8080');

/** A Standard Webhooks secret: `whsec_` and at least 24 random bytes in base64. */
const webhookSecret = z
  .string()
  .regex(/^whsec_[A-Za-z0-9+/]+={0,2}$/, 'must be whsec_ followed by base64, e.g. from: echo "whsec_$(head -c 32 /dev/urandom | base64)"')
  .refine((s) => Buffer.from(s.slice(6), 'base64').length >= 24, 'the secret must hold at least 24 bytes (32 base64 characters)');

export const configSchema = z.strictObject({
  /** Node identifier; default `farmhand-<12 hex digits of the first MAC address>`. */
  node_id: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/, 'letters, digits, ".", "_" and "-" only, at most 63')
    .optional(),
  /** Where the HTTP API listens. */
  listen: hostPort.default('0.0.0.0:8080'),
  /**
   * Absolute base URL for `job_url`/`result_url`. Default: taken from each
   * request's Host header, so URLs work whichever address the client used.
   */
  public_url: z.url().optional(),
  data_dir: z.string().min(1).default('/var/lib/farmhand'),
  test_pack: z.strictObject({
    /** Path or URL of the test-pack git repository. */
    url: z.string().min(1),
    /** A branch, tag or HEAD is fetched again before use when the last fetch is older than this. */
    refresh_secs: z.number().nonnegative().default(10),
    /** The mirror is fetched in the background this often (and on the push hook); 0: only when told. */
    poll_secs: z.number().nonnegative().default(60),
  }),
  runner: z
    .strictObject({
      /** The interpreter test scripts run under. */
      python: z.string().min(1).default('/usr/bin/python3'),
      /** Per-test timeout when the test pack sets none (`[test_pack] test_timeout_secs`). */
      default_timeout_secs: z.number().positive().default(3600),
      /** Between TERM and KILL when a run is stopped. */
      kill_grace_secs: z.number().nonnegative().default(5),
      /** Stop answers 202 when the job has not stopped within this time. */
      stop_response_secs: z.number().positive().default(20),
      /** Cap on what one run may write to stdout+stderr; the rest is dropped and the logs say so. */
      max_output_bytes: z.number().int().positive().default(64 * 1024 * 1024),
      /**
       * Which user test scripts run as (docs/configuration.md, "Running tests as another user"). A user name: that
       * dedicated user, which must exist. Unset: `farmhand-test` when the daemon can switch user (root, or the
       * capabilities CAP_SETUID, CAP_SETGID and CAP_KILL; a root daemon creates the user when missing), else the
       * daemon's own user, with a warning at start and on the portal's page of the node. `false`: the daemon's own
       * user, on purpose (tests can then read the node's credential, tokens.json and the data directory).
       */
      run_tests_as: z
        .union([
          z.literal(false),
          z.string().regex(/^[a-z_][a-z0-9_-]{0,31}$/, 'a user name: lower-case letters, digits, "_" and "-", e.g. farmhand-test; or false for the daemon\'s own user'),
        ], { error: 'a user name (e.g. farmhand-test), or false for the daemon\'s own user' })
        .optional(),
    })
    .prefault({}),
  capture: z
    .strictObject({
      /** Which picture the node sees: src/config/uris/capture.ts. */
      uri: captureUri,
      width: z.number().int().min(16).max(7680).default(1280),
      height: z.number().int().min(16).max(4320).default(720),
      fps: z.number().positive().max(120).default(25),
      /** Frames per second Node checks for a black or frozen picture (and, at least, hands to screenshots). */
      preview_fps: z.number().positive().max(60).default(5),
      /**
       * Frames per second ffmpeg hands to Node for the live view (capped at `fps`; never below `preview_fps`):
       * the live view shows every one that changed. 0: the live view gets `preview_fps`. 25 (the default)
       * costs ~0.04 cores at 720p25 whether anyone watches or not (docs/portal.md, "Live view on the shipped
       * configuration").
       */
      live_fps: z.number().nonnegative().max(60).default(25),
      /**
       * The live view's picture width (height by the aspect). Below `width`, ffmpeg makes the live view's pictures
       * at this size as JPEGs (MJPEG) on an output of their own, which the live view passes on, and the full-size
       * preview keeps `preview_fps`: the first viewer costs ~0.03 cores at most directly instead of ~0.1 when every frame changes
       * (docs/portal.md, "ffmpeg makes the live JPEG"). 0: the live view gets the full-size preview at `live_fps`.
       */
      live_width: z.number().int().nonnegative().max(7680).default(640),
      /** V4L2 input format, e.g. `mjpeg` or `yuyv422`; ffmpeg's choice when unset. */
      input_format: z.string().optional(),
      ffmpeg: z.string().min(1).default('ffmpeg'),
      /** Record continuously (H.264) so every test run gets a `video.mp4`. */
      record_video: z.boolean().default(true),
      /**
       * Start-up waits this long for the first frame before answering requests
       * and telling systemd READY; past it the daemon starts anyway, offline, and
       * says why (docs/operations.md, "Start-up and readiness"). 0: no wait.
       */
      first_frame_wait_secs: z.number().nonnegative().max(600).default(15),
      /**
       * With `uri: virtual:`: the box animates (channel-change black, menu slide, spinner), numbers
       * every frame in its top band and records when its picture really changed (for timing tests).
       */
      virtual_animations: z.boolean().default(false),
    })
    .prefault({}),
  retention: z
    .strictObject({
      /** Keep at most this many results; the oldest go first. */
      max_results: z.number().int().positive().default(100_000),
      /** Delete the oldest results while the data directory's filesystem has less free space. */
      min_free_mb: z.number().nonnegative().default(1024),
    })
    .prefault({}),
  ir: z
    .strictObject({
      /** How the node presses keys: src/config/uris/ir.ts. */
      uri: irUri,
    })
    .prefault({}),
  power: z
    .strictObject({
      /** The outlet feeding the device under test (stbt.PDU): src/config/uris/power.ts. */
      uri: powerUri,
      /** Other outlets a test switches by name (`stbt.PDU("router")`): network PDUs only (docs/power.md). */
      outlets: powerOutlets,
    })
    .prefault({}),
  auth: z
    .strictObject({
      /** v1 clients send no credentials; set true to require a token on v1 too. */
      v1_requires_token: z.boolean().default(false),
    })
    .prefault({}),
  /** Sign-in with OpenID Connect (docs/auth.md); absent: tokens only. */
  oidc: oidcSchema,
  api: z
    .strictObject({
      /** How long await_completion holds a request before answering 202 (the spec: 55 s). */
      await_completion_secs: z.number().positive().max(3600).default(55),
      /** Largest JSON request body; larger is a 413. */
      max_body_bytes: z.number().int().positive().default(1024 * 1024),
    })
    .prefault({}),
  rate_limit: z
    .strictObject({
      /** Sustained requests per second per client (token, else address). */
      requests_per_second: z.number().positive().default(20),
      /** Requests a client may send at once above the sustained rate. */
      burst: z.number().int().positive().default(100),
      /** The artifact download endpoints' own, more generous burst. */
      artifact_burst: z.number().int().positive().default(1000),
    })
    .prefault({}),
  node: z
    .strictObject({
      /** ISO 8601 date the licence expires; run_tests answers 403 after it. */
      licence_expiry: z.iso.date().default('2099-12-31'),
      /** Known only when configured (no portal sees this node from outside). */
      external_ip_address: z.string().nullable().default(null),
      geoip_city: z.string().nullable().default(null),
      geoip_country: z.string().nullable().default(null),
    })
    .prefault({}),
  /** The event stream, GET /api/v2/events (docs/events.md). */
  events: z
    .strictObject({
      /** Events kept for clients that resume with Last-Event-ID. */
      buffer_size: z.number().int().min(1).max(1_000_000).default(1000),
      /** Most stream clients at once; one more gets a 503. */
      max_clients: z.number().int().min(1).max(10_000).default(64),
      /** Most streams one caller (a token, or an address when not signed in) holds at once. */
      max_clients_per_caller: z.number().int().min(1).max(10_000).default(8),
      /** A comment line this often keeps proxies from closing a quiet stream. */
      heartbeat_secs: z.number().positive().max(3600).default(15),
      /** A client that leaves this much unread is cut off (it reconnects and resumes). */
      max_client_backlog_bytes: z.number().int().min(1024).default(1024 * 1024),
      /** How often capture health is sampled for node.online / node.offline. */
      health_poll_secs: z.number().positive().max(3600).default(1),
    })
    .prefault({}),
  /** The audit trail in <data_dir>/audit/ (docs/auth.md, "Audit trail"). */
  audit: z
    .strictObject({
      /** Days of entries kept; older days' files are deleted (at start and hourly). */
      keep_days: z.number().int().min(1).max(36_500).default(90),
      /** A manual control session (presses of one caller on the node) ends after this long without a press. */
      manual_idle_secs: z.number().positive().max(86_400).default(300),
    })
    .prefault({}),
  /** Events POSTed to URLs as CloudEvents, signed the Standard Webhooks way (docs/events.md). */
  webhooks: z
    .strictObject({
      endpoints: z
        .array(
          z.strictObject({
            url: z
              .url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' })
              .refine(
                (u) => { const p = new URL(u); return p.username === '' && p.password === ''; },
                "must not carry a user name or password (user:password@): fetch never sends them, so nothing would be delivered. Take them out of the URL; a receiver authenticates farmhand's deliveries by their webhook-signature header, made with this endpoint's secret (docs/events.md, \"Verifying a request\")",
              ),
            secret: webhookSecret,
            /** Only these event types (e.g. ["run.finished"]); default all. */
            types: z.array(z.enum(EVENT_TYPES as [string, ...string[]])).min(1).optional(),
          }),
        )
        .max(32)
        .default([]),
      /** Attempts per event, the first included; then it is abandoned (logged, counted). */
      max_attempts: z.number().int().min(1).max(30).default(8),
      /** Delay before the second attempt; it doubles per attempt, with jitter, up to backoff_max_ms. */
      backoff_initial_ms: z.number().int().min(1).default(1000),
      backoff_max_ms: z.number().int().min(1).default(5 * 60 * 1000),
      /** One attempt's time limit (connect, send, status line). */
      timeout_secs: z.number().positive().max(300).default(10),
      /** Events waiting per endpoint; past it the oldest waiting one is dropped (logged, counted). */
      queue_size: z.number().int().min(1).max(100_000).default(1000),
    })
    .prefault({}),
  health_check: z
    .strictObject({
      /** Infrastructure errors in a row that make the node run its health check (the test pack's `test_pack.health_check`); 0: never. */
      after_infrastructure_errors: z.number().int().nonnegative().default(3),
      /** Seconds between health checks while they pass; 0: no periodic check. */
      interval_secs: z.number().nonnegative().default(24 * 3600),
      /** Seconds between tries of a failed health check (the node is not available until one passes). */
      retry_secs: z.number().positive().default(300),
    })
    .prefault({}),
  /**
   * Join a farm (docs/farm.md, "The node's connection"): keep one outbound WebSocket to the portal.
   * Absent: the node is a single appliance and connects nowhere.
   */
  portal: z
    .strictObject({
      /** The portal's URL (`https://portal.example:8080`; `ws://`/`wss://` are accepted too). */
      url: z.url({ protocol: /^(https?|wss?)$/, error: 'must be an http(s):// or ws(s):// URL, e.g. https://portal.example:8080' }),
      /** File holding the node credential that `farmhand farm node add <node_id>` printed on the portal. */
      node_credential_file: z.string().min(1),
      /**
       * The longest wait between two attempts to reach the portal (the jittered back-off's cap; default 30 s). At least
       * 0.1 (no tight loop of connects against the portal by mistake), at most 30: a portal that restarts gives a node that had a running job 30 s plus 3 heartbeats to come back
       * (its `restart_grace_secs`). The tests set it short so as not to wait out a 30 s back-off.
       */
      reconnect_max_secs: z.number().min(0.1).max(30).optional(),
      /**
       * How long a run's files wait after its end before they are uploaded (default 3 s; 0: at once): their reading,
       * hashing and sending then do not compete with the node's next job starting (docs/farm.md, "Results: uploads
       * and the farm index"). Meanwhile the portal serves them from the node.
       */
      upload_delay_secs: z.number().min(0).max(300).optional(),
    })
    .optional(),
  log_level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});

export type FarmConfig = z.infer<typeof configSchema> & { node_id: string };
export type ConfigInput = z.input<typeof configSchema>;
