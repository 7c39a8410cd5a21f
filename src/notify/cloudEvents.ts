/**
 * A hub event as a CloudEvents 1.0 event in the structured JSON mode
 * (docs/events.md): the same id, time and data as on the event stream, the
 * type prefixed `farmhand.`, the node as the source, and what the event is
 * about (a result, a job, a reservation) as the subject.
 */
import type { FarmEvent } from '../core/events.js';

export interface CloudEvent {
  specversion: '1.0';
  id: string;
  source: string;
  type: string;
  subject?: string;
  time: string;
  datacontenttype: 'application/json';
  data: FarmEvent['data'];
}

export const CLOUDEVENTS_CONTENT_TYPE = 'application/cloudevents+json; charset=utf-8';

/** `urn:farmhand:node:<node_id>`: stable whatever address the node is reached at. */
export const sourceOf = (nodeId: string): string => `urn:farmhand:node:${nodeId}`;

export function toCloudEvent(e: FarmEvent): CloudEvent {
  const subject = subjectOf(e);
  return {
    specversion: '1.0',
    id: e.id,
    source: sourceOf(e.data.node_id),
    type: `farmhand.${e.type}`,
    ...(subject !== undefined && { subject }),
    time: e.time,
    datacontenttype: 'application/json',
    data: e.data,
  };
}

function subjectOf(e: FarmEvent): string | undefined {
  const d = e.data as unknown as Record<string, unknown>;
  if (typeof d.result_id === 'string') return d.result_id;
  if (typeof d.job_uid === 'string') return d.job_uid;
  if (typeof d.reservation_id === 'number') return `reservation/${d.reservation_id}`;
  return undefined;
}
