/** The config's `ir.uri`: how the node presses keys on the device (src/hardware/ir/transports). */
import { z } from 'zod';

/** `none`, `irtoy:/dev/ttyACM0` (USB IR Toy / IRDroid), `lircd:/run/lirc/lircd`, `virtual:` (the virtual set-top box). */
export const irUri = z
  .string()
  .regex(/^(none|virtual:|irtoy:\/dev\/[\w./-]+|lircd:\/[\w./-]+)$/, 'one of none, virtual:, irtoy:/dev/ttyX, lircd:/path/to/socket')
  .default('none');
