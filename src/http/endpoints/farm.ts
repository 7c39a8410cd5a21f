/** The table's entries for the nodes' upload API on the portal (node credentials; src/farm/uploadRoutes.ts). Not in the OpenAPI document. */
import { e, RESULT, type Endpoint } from './entry.js';

export const FARM: Endpoint[] = [
  e('GET', `/farm/v1/results${RESULT}/files/*path`, 'node', 'upload results', 'portal'),
  e('PUT', `/farm/v1/results${RESULT}/files/*path`, 'node', 'upload results', 'portal'),
  e('POST', `/farm/v1/results${RESULT}/files/*path`, 'node', 'upload results', 'portal'),
  e('DELETE', `/farm/v1/results${RESULT}/files/*path`, 'node', 'upload results', 'portal'),
  e('PUT', `/farm/v1/results${RESULT}/record`, 'node', 'upload results', 'portal'),
  e('POST', `/farm/v1/results${RESULT}/complete`, 'node', 'upload results', 'portal'),
];
