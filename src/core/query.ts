/**
 * Results queries: the filter grammar, sort and tz of the results endpoints.
 * (Placeholder types; the parser lands with the results index.)
 */
import type { ResultRecord } from './model.js';

export type SortField = 'category' | 'date' | 'duration' | 'job' | 'testcase' | 'result';

export interface ResultQuery {
  /** Compiled filter; matches every record when the filter is empty. */
  predicate: (r: ResultRecord) => boolean;
  sort: { field: SortField; dir: 'asc' | 'desc' };
  /** IANA zone the dates of the filter were read in. */
  tz: string;
  limit: number;
}
