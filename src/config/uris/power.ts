/** The config's `power.uri`: the outlet feeding the device under test (src/hardware/power). */
import { z } from 'zod';

/** `none`, `virtual:` (the virtual set-top box's mains). */
export const powerUri = z.string().regex(/^(none|virtual:)$/, 'one of none, virtual:').default('none');
