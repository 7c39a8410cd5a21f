/** The config's `ir.uri`: how the node presses keys on the device (src/hardware/ir/transports, docs/remotes.md). */
import { z } from 'zod';

/**
 * `none`, `irtoy:/dev/ttyACM0` (USB IR Toy / IRDroid), `lircd:/run/lirc/lircd`, `virtual:` (the virtual
 * set-top box), `cec:/dev/cec0[?to=<la>]` (HDMI-CEC), `roku:http://<ip>:8060` (Roku ECP) or
 * `adb:<serial>` / `adb:<host>:<port>` (Android over adb). The transport checks the details again
 * (createIrTransport), so a URI that passes here and is still wrong fails the start with its reason.
 */
export const irUri = z
  .string()
  .regex(
    /^(none|virtual:|irtoy:\/dev\/[\w./-]+|lircd:\/[\w./-]+|cec:(\/dev\/[\w./-]+)?(\?to=\d{1,2})?|roku:http:\/\/[\w.-]+(:\d{1,5})?\/?|adb:[\w.:[\]-]{1,128})$/,
    'one of none, virtual:, irtoy:/dev/ttyX, lircd:/path/to/socket, cec:/dev/cec0, roku:http://<ip>:8060, adb:<serial or host:port>',
  )
  .default('none');
