/**
 * The v2 API tests of test/http/v2Api.ts through 3 portal replicas ("many") behind a real HAProxy (balance
 * roundrobin: consecutive requests land on different replicas), the node joined to one of them (docs/farm.md,
 * "The v2 tests and stbt_rig's flows through 3 replicas"). A file of its own, so that `npm test` runs it beside the others
 * (docs/testing.md, "Where the time goes").
 */
import { describeV2Api } from './v2Api.js';

describeV2Api({ replicas: 3 });
