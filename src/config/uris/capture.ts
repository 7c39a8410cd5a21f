/** The config's `capture.uri`: which picture the node sees (src/hardware/capture). */
import { z } from 'zod';

/** `testsrc:` (ffmpeg's test pattern), `v4l2:/dev/videoN`, `virtual:` (the virtual set-top box), `none:`. */
export const captureUri = z
  .string()
  .regex(/^(testsrc:|v4l2:\/dev\/[\w./-]+|virtual:|none:)$/, 'one of testsrc:, v4l2:/dev/videoN, virtual:, none:')
  .default('testsrc:');
