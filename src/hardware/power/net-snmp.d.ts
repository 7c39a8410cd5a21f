/** The part of net-snmp farmhand uses (the package ships no types): v1/v2c get and set. */
declare module 'net-snmp' {
  export interface Varbind {
    oid: string;
    type?: number;
    value?: unknown;
  }
  export interface Session {
    get(oids: string[], cb: (error: Error | null, varbinds?: Varbind[]) => void): void;
    set(varbinds: Varbind[], cb: (error: Error | null, varbinds?: Varbind[]) => void): void;
    close(): void;
    on(event: 'error', listener: (e: Error) => void): void;
  }
  export interface SessionOptions {
    port?: number;
    retries?: number;
    timeout?: number;
    transport?: 'udp4' | 'udp6';
    version?: number;
  }
  export function createSession(target: string, community: string, options?: SessionOptions): Session;
  export function isVarbindError(vb: Varbind): boolean;
  export function varbindError(vb: Varbind): string;
  export const Version1: number;
  export const Version2c: number;
  export const ObjectType: { Integer: number };
  export class RequestTimedOutError extends Error {}
  export class RequestFailedError extends Error {
    status: number;
  }
  const snmp: {
    createSession: typeof createSession;
    isVarbindError: typeof isVarbindError;
    varbindError: typeof varbindError;
    Version1: number;
    Version2c: number;
    ObjectType: { Integer: number };
    RequestTimedOutError: typeof RequestTimedOutError;
    RequestFailedError: typeof RequestFailedError;
  };
  export default snmp;
}
