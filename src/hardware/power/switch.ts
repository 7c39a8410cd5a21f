/** What each outlet driver provides; index.ts makes a PowerOutlet of it (queue, read-back, cycle). */
export interface OutletSwitch {
  /** The PDU the outlet belongs to: requests to one run one at a time (serialise.ts). */
  readonly key: { host: string; port: number };
  /** True when the outlet is on. */
  read(): Promise<boolean>;
  /** Ask the PDU to switch the outlet; resolves once the PDU accepted the request. */
  write(on: boolean): Promise<void>;
}
