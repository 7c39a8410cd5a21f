/**
 * A `cec-ctl` stand-in for tests and the bench (no CEC adapter here): a
 * POSIX shell script (dash: quick to start, as a C program is) that checks its arguments are exactly what farmhand sends
 * (`-d <dev> -s` then `--to <la>` and messages, or a role and `--osd-name
 * farmhand`), records each run's arguments, and answers as cec-ctl 1.22 does
 * ("Transmit from ..." and "Sequence: ..." per message). Anything else exits
 * 2 with "unexpected arguments". `mode` (a file beside it) makes the bus
 * misbehave: `ok`, `nack` (Tx, Not Acknowledged), `unconfigured` (no logical
 * address until a role is given), `nodevice` (cannot open the device),
 * `arblost` (another bus error), `hang` (never ends).
 */
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';

export type CecMode = 'ok' | 'nack' | 'unconfigured' | 'nodevice' | 'arblost' | 'hang';

export interface CecStandIn {
  /** The script: pass it as `cecCtl`. */
  bin: string;
  setMode(mode: CecMode): Promise<void>;
  /** The arguments of each run so far, joined by spaces. */
  calls(): Promise<string[]>;
  cleanup(): Promise<void>;
}

const SCRIPT = String.raw`#!/bin/sh
dir="DIR_OF_0"
read -r mode < "$dir/mode"
printf '%s\n' "$*" >> "$dir/calls"
[ "$1" = "-d" ] && [ -n "$2" ] && [ "$3" = "-s" ] || { echo "unexpected arguments: $*" >&2; exit 2; }
dev="$2"; shift 3
if [ "$mode" = nodevice ]; then echo "Failed to open $dev: No such file or directory" >&2; exit 1; fi
if [ "$mode" = hang ]; then exec sleep 30; fi
case "$1" in
  --tv|--playback)
    [ "$#" = 3 ] && [ "$2" = "--osd-name" ] && [ "$3" = farmhand ] || { echo "unexpected arguments: $*" >&2; exit 2; }
    touch "$dir/configured"; echo "Logical Address: 0"; exit 0;;
  --to) to="$2"; shift 2;;
  *) echo "unexpected arguments: $*" >&2; exit 2;;
esac
case "$to" in ''|*[!0-9]*) echo "bad --to" >&2; exit 2;; esac
if [ "$mode" = unconfigured ] && [ ! -e "$dir/configured" ]; then exit 0; fi
seq=1
while [ "$#" -gt 0 ]; do
  case "$1" in
    --user-control-pressed) case "$2" in ui-cmd=*[!a-z0-9-]*|ui-cmd=) echo "bad ui-cmd: $2" >&2; exit 2;; ui-cmd=*) ;; *) echo "bad ui-cmd: $2" >&2; exit 2;; esac
      op="USER_CONTROL_PRESSED (0x44):"; shift 2;;
    --user-control-released) op="USER_CONTROL_RELEASED (0x45):"; shift;;
    --standby) op="STANDBY (0x36):"; shift;;
    --image-view-on) op="IMAGE_VIEW_ON (0x04):"; shift;;
    *) echo "unexpected arguments: $*" >&2; exit 2;;
  esac
  printf '\nTransmit from TV to Playback Device 1 (0 to %s):\n%s\n' "$to" "$op"
  printf '\tSequence: %d Tx Timestamp: 1234.%03ds\n' "$seq" "$seq"
  [ "$mode" = nack ] && printf '\tTx, Not Acknowledged (4), Max Retries\n'
  [ "$mode" = arblost ] && printf '\tTx, Arbitration Lost (1), Max Retries\n'
  seq=$((seq + 1))
done
exit 0
`;

export async function makeCecStandIn(mode: CecMode = 'ok'): Promise<CecStandIn> {
  const dir = await mkdtemp(path.join(tmpdir(), 'farmhand-cec-'));
  const bin = path.join(dir, 'cec-ctl');
  await writeFile(bin, SCRIPT.replace('DIR_OF_0', '$' + '{0%/*}')); // the shell's dirname without a fork
  await chmod(bin, 0o755);
  await writeFile(path.join(dir, 'mode'), mode);
  return {
    bin,
    setMode: (m) => writeFile(path.join(dir, 'mode'), m),
    calls: async () => (await readFile(path.join(dir, 'calls'), 'utf8').catch(() => '')).split('\n').filter(Boolean),
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
}
