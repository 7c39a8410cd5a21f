/** The part of fs-native-extensions farmhand uses (the package ships no types). */
declare module 'fs-native-extensions' {
  /** Exclusive (or shared) OFD lock on an open file; false when another descriptor holds it. */
  export function tryLock(fd: number, opts?: { shared?: boolean }): boolean;
  export function unlock(fd: number): void;
}
