/**
 * Times in a client's time zone for the result formats (CSV, jUnit XML, the
 * run log, the triage page). Stored times are UTC; these helpers render an
 * instant as ISO 8601 local to an IANA zone.
 *
 * luxon's zone lookup goes through Intl and costs a few microseconds a call,
 * which is too slow for a 50 MB log or 2,000 CSV rows; offsets are therefore
 * cached per UTC hour (a zone changes its offset at most once in an hour).
 */
import { IANAZone } from 'luxon';
import { FarmError } from '../../core/errors.js';

const HOUR = 3_600_000;

/** Renders instants local to one zone. Cheap to create; create one per response. */
export class ZoneFormatter {
  private readonly zone: IANAZone;
  /** UTC hour number -> the offset valid for the whole hour, or null when it changes inside it. */
  private readonly hours = new Map<number, number | null>();

  /** @throws FarmError `invalid_request` for a name that is not an IANA zone. */
  constructor(readonly tz: string) {
    if (!IANAZone.isValidZone(tz)) {
      throw new FarmError('invalid_request', `tz: unknown time zone "${tz}"; use an IANA name such as UTC or Europe/London`);
    }
    this.zone = IANAZone.create(tz);
  }

  /**
   * The zone's UTC offset at `ts` (ms since the epoch), in whole minutes.
   * Rounded because pre-1900 local mean times have offsets with seconds, which
   * ISO 8601's `+hh:mm` cannot carry; the instant stays right either way.
   */
  offsetMinutes(ts: number): number {
    const hour = Math.floor(ts / HOUR);
    let cached = this.hours.get(hour);
    if (cached === undefined) {
      const a = Math.round(this.zone.offset(hour * HOUR));
      const b = Math.round(this.zone.offset(hour * HOUR + HOUR - 1));
      cached = a === b ? a : null;
      this.hours.set(hour, cached);
    }
    return cached ?? Math.round(this.zone.offset(ts));
  }

  /**
   * `2026-11-23T10:19:15.123+01:00`; `ms: false` drops the fraction,
   * `offset: false` drops the zone (local time only, as the Ant jUnit schema wants).
   */
  iso(ts: number, opts: { ms: boolean; offset: boolean }): string {
    const off = this.offsetMinutes(ts);
    const local = new Date(ts + off * 60_000).toISOString(); // YYYY-MM-DDTHH:MM:SS.mmmZ
    const text = local.slice(0, opts.ms ? 23 : 19);
    return opts.offset ? text + offsetText(off) : text;
  }
}

/** `+01:00`, `-03:30`, `+00:00` (never `Z`, so every row has the same shape). */
export function offsetText(minutes: number): string {
  const sign = minutes < 0 ? '-' : '+';
  const abs = Math.abs(minutes);
  const hh = String(Math.floor(abs / 60)).padStart(2, '0');
  const mm = String(abs % 60).padStart(2, '0');
  return `${sign}${hh}:${mm}`;
}

/** ms since the epoch of a stored ISO 8601 time; NaN when it does not parse. */
export const instant = (iso: string): number => Date.parse(iso);
