/**
 * The v2 API tests of test/http/v2Api.ts through a farm portal in front of the node (docs/farm.md, the
 * introduction): a real PostgreSQL, a portal and the node joined to it. A file of its own, so that `npm test`
 * runs it beside the others (docs/testing.md, "Where the time goes").
 */
import { describeV2Api } from './v2Api.js';

describeV2Api('portal');
