/**
 * A CEC adapter stand-in for tests and the bench (no CEC adapter here), in two parts that share one
 * simulated adapter (files in a temporary folder):
 *   - `python`: an interpreter to pass as the transport's `python`. It is Debian's python3 running
 *     the transport's own helper (cec-helper.ts) unchanged, with the kernel's side of a CEC device
 *     put in its place: `os.open` of a `/dev/cec*` path and `fcntl.ioctl` on it behave as the CEC
 *     framework documents (CEC_ADAP_G_LOG_ADDRS, CEC_TRANSMIT: the ioctl numbers and struct sizes of
 *     linux/cec.h checked, the initiator must be the adapter's logical address and not the
 *     destination, ENONET while unconfigured, tx_status filled in). Each message transmitted is
 *     recorded as `<device> <bytes in hex>`, e.g. `/dev/cec0 04:44:00`.
 *   - `bin`: a `cec-ctl` (POSIX sh) for configuring an adapter, which checks its arguments are exactly
 *     `-d <dev> -s --tv|--playback --osd-name farmhand`, records them, and makes the adapter
 *     configured (logical address 0 for --tv, 4 for --playback). Anything else exits 2.
 * `mode` makes the bus misbehave: `ok`, `nack` (Tx, Not Acknowledged), `unconfigured` (no logical address
 * until cec-ctl gives a role), `nodevice` (the device node is missing), `arblost` (another bus error),
 * `hang` (a transmit never ends).
 */
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';

export type CecMode = 'ok' | 'nack' | 'unconfigured' | 'nodevice' | 'arblost' | 'hang';

export interface CecStandIn {
  /** The cec-ctl script: pass it as `cecCtl`. */
  bin: string;
  /** The python3 with the fake kernel: pass it as `python`. */
  python: string;
  setMode(mode: CecMode): Promise<void>;
  /** The adapter's logical address while configured (0, a TV, unless set). */
  setLogicalAddress(la: number): Promise<void>;
  /** The arguments of each cec-ctl run so far, joined by spaces. */
  calls(): Promise<string[]>;
  /** Each message the adapter was asked to transmit: `<device> <hex bytes>`. */
  transmits(): Promise<string[]>;
  cleanup(): Promise<void>;
}

const CEC_CTL = String.raw`#!/bin/sh
dir="DIR_OF_0"
printf '%s\n' "$*" >> "$dir/calls"
[ "$1" = "-d" ] && [ -n "$2" ] && [ "$3" = "-s" ] || { echo "unexpected arguments: $*" >&2; exit 2; }
shift 3
case "$1" in
  --tv) la=0;;
  --playback) la=4;;
  *) echo "unexpected arguments: $*" >&2; exit 2;;
esac
[ "$#" = 3 ] && [ "$2" = "--osd-name" ] && [ "$3" = farmhand ] || { echo "unexpected arguments: $*" >&2; exit 2; }
echo "$la" > "$dir/la"; touch "$dir/configured"; echo "Logical Address: $la"; exit 0
`;

const FAKE_KERNEL = String.raw`#!/usr/bin/python3
import errno, fcntl, os, struct, sys, time
DIR = os.path.dirname(os.path.abspath(__file__))
MSG = struct.Struct('<QQIIII16sBBBBBBBx')
real_open, real_ioctl, devices = os.open, fcntl.ioctl, {}

def state(name, default=''):
    try:
        with open(os.path.join(DIR, name)) as f:
            return f.read().strip()
    except FileNotFoundError:
        return default

def logical_address():
    if state('mode') == 'unconfigured' and not os.path.exists(os.path.join(DIR, 'configured')):
        return None
    return int(state('la', '0'))

def fake_open(path, flags, *args, **kw):
    if not str(path).startswith('/dev/cec'):
        return real_open(path, flags, *args, **kw)
    if state('mode') == 'nodevice':
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    fd = real_open('/dev/null', flags)
    devices[fd] = path
    return fd

def g_log_addrs(buf):
    if len(buf) != 92:
        raise OSError(errno.EFAULT, 'struct cec_log_addrs is 92 bytes')
    la = logical_address()
    buf[0:8] = bytes([la if la is not None else 0xff, 0xff, 0xff, 0xff]) + struct.pack('<HBB', 0 if la is None else 1 << la, 5, 0 if la is None else 1)

def transmit(fd, buf):
    if len(buf) != MSG.size:
        raise OSError(errno.EFAULT, 'struct cec_msg is 56 bytes')
    f = list(MSG.unpack(buf))
    n, body = f[2], f[6]
    la = logical_address()
    if la is None:
        raise OSError(errno.ENONET, os.strerror(errno.ENONET))
    if not 1 <= n <= 16 or body[0] >> 4 != la or body[0] >> 4 == body[0] & 15:
        raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
    with open(os.path.join(DIR, 'transmits'), 'a') as out:
        out.write('%s %s\n' % (devices[fd], body[:n].hex(':')))
    mode = state('mode')
    if mode == 'hang':
        time.sleep(3600)
    f[9] = {'nack': 0x24, 'arblost': 0x22}.get(mode, 0x01)
    buf[:] = MSG.pack(*f)

def fake_ioctl(fd, request, arg=0, mutate=True):
    if fd not in devices:
        return real_ioctl(fd, request, arg, mutate)
    if request == 0x805c6103:
        return g_log_addrs(arg)
    if request == 0xc0386105:
        return transmit(fd, arg)
    raise OSError(errno.ENOTTY, os.strerror(errno.ENOTTY))

os.open, fcntl.ioctl = fake_open, fake_ioctl
if sys.argv[1:2] != ['-c']:
    sys.exit('the stand-in runs python3 -c <program> <args> only, got %r' % sys.argv[1:])
program, sys.argv = sys.argv[2], ['-c'] + sys.argv[3:]
exec(compile(program, '<string>', 'exec'), {'__name__': '__main__'})
`;

export async function makeCecStandIn(mode: CecMode = 'ok'): Promise<CecStandIn> {
  const dir = await mkdtemp(path.join(tmpdir(), 'farmhand-cec-'));
  const bin = path.join(dir, 'cec-ctl');
  const python = path.join(dir, 'python3');
  await writeFile(bin, CEC_CTL.replace('DIR_OF_0', '$' + '{0%/*}')); // the shell's dirname without a fork
  await writeFile(python, FAKE_KERNEL);
  await Promise.all([chmod(bin, 0o755), chmod(python, 0o755)]);
  await writeFile(path.join(dir, 'mode'), mode);
  const lines = async (name: string) => (await readFile(path.join(dir, name), 'utf8').catch(() => '')).split('\n').filter(Boolean);
  return {
    bin,
    python,
    setMode: (m) => writeFile(path.join(dir, 'mode'), m),
    setLogicalAddress: (la) => writeFile(path.join(dir, 'la'), String(la)),
    calls: () => lines('calls'),
    transmits: () => lines('transmits'),
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
}
