/** What ffmpeg reads from: its input options and where the frames come from (ffmpeg-args.ts, network-input.ts). */
export interface InputSpec {
  args: string[];
  stdin: 'none' | 'frames';
  /** The picture's size may change mid-stream (a network encoder's mode change): every output scales. */
  resizes?: boolean;
}
