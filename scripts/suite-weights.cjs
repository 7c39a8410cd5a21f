#!/usr/bin/env node
// Writes test/suite-weights.json (the order of `npm test`, test/helpers/suiteOrder.cjs) from a profile of the suite:
//
//   FARMHAND_PROFILE_SUITE=/tmp/p.json npm test && node scripts/suite-weights.cjs /tmp/p.json
//
// Each file's weight is its tests' and hooks' seconds in that run, to 0.1 s.
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const profile = process.argv[2];
if (!profile) {
  console.error('usage: node scripts/suite-weights.cjs <profile.json from FARMHAND_PROFILE_SUITE=<file> npm test>');
  process.exit(2);
}
const { files } = JSON.parse(fs.readFileSync(profile, 'utf8'));
const out = {};
for (const f of [...files].sort((a, b) => b.ms - a.ms)) out[f.file.split(path.sep).join('/')] = Math.round(f.ms / 100) / 10;
fs.writeFileSync(path.join(__dirname, '..', 'test', 'suite-weights.json'), JSON.stringify(out, null, 1) + '\n');
console.log(`test/suite-weights.json: ${Object.keys(out).length} files`);
