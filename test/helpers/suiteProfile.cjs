// Where the suite's time goes (docs/testing.md, "Where the time goes"): mocha's spec reporter, plus, at the end,
// the 25 test files, tests and hooks that took longest. .mocharc.cjs uses it when FARMHAND_PROFILE_SUITE is set:
//
//   FARMHAND_PROFILE_SUITE=1 npm test                  the spec output, then the tables
//   FARMHAND_PROFILE_SUITE=/tmp/p.json npm test        the same, and every file's figures as JSON in that file
//
// A file's time is what its tests and its own hooks (before/after, each) took, as mocha measured them: the same in a
// serial run and in a parallel one (where its events reach this process only when the file ends). The root hooks'
// time (test/helpers/rootHooks.ts, contractHooks.ts) and the loading of files are not counted in any file; the
// "run" line is the wall time from the first event to the last. CommonJS so that mocha loads it without tsx.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const Mocha = require('mocha');

const { EVENT_RUN_BEGIN, EVENT_RUN_END, EVENT_TEST_END, EVENT_HOOK_END } = Mocha.Runner.constants;
const TOP = 25;

class SuiteProfile extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    /** @type {Map<string, {file: string, ms: number, testMs: number, hookMs: number, tests: number}>} */
    const files = new Map();
    const tests = [];
    const hooks = [];
    let begun = 0;
    const fileOf = (r) => path.relative(process.cwd(), r.file || (r.parent && r.parent.file) || '(no file)');
    const entry = (file) => {
      let e = files.get(file);
      if (!e) files.set(file, (e = { file, ms: 0, testMs: 0, hookMs: 0, tests: 0 }));
      return e;
    };
    runner.once(EVENT_RUN_BEGIN, () => (begun = Date.now()));
    runner.on(EVENT_TEST_END, (t) => {
      const ms = t.duration || 0;
      const e = entry(fileOf(t));
      e.ms += ms;
      e.testMs += ms;
      e.tests++;
      tests.push({ file: e.file, title: t.fullTitle(), ms });
    });
    runner.on(EVENT_HOOK_END, (h) => {
      const ms = h.duration || 0;
      // Root hooks have no file: they belong to no test file.
      if (!h.file) return;
      const e = entry(fileOf(h));
      e.ms += ms;
      e.hookMs += ms;
      hooks.push({ file: e.file, title: h.fullTitle(), ms });
    });
    runner.once(EVENT_RUN_END, () => {
      const wall = Date.now() - begun;
      const list = [...files.values()].sort((a, b) => b.ms - a.ms);
      const sum = list.reduce((s, e) => s + e.ms, 0);
      const s = (ms) => (ms / 1000).toFixed(1).padStart(7);
      const out = [];
      out.push('', `suite profile: run ${s(wall)} s wall; ${s(sum)} s in ${list.length} files' tests and hooks`, '');
      out.push(`  top ${TOP} files       s   tests-s   hooks-s  tests  file`);
      let acc = 0;
      for (const e of list.slice(0, TOP)) {
        acc += e.ms;
        out.push(`              ${s(e.ms)} ${s(e.testMs)}   ${s(e.hookMs)}  ${String(e.tests).padStart(5)}  ${e.file}`);
      }
      out.push(`  (these ${Math.min(TOP, list.length)}: ${s(acc)} s, ${((100 * acc) / (sum || 1)).toFixed(0)}% of the files' time)`, '');
      out.push(`  top ${TOP} tests       s  file: title`);
      for (const t of tests.sort((a, b) => b.ms - a.ms).slice(0, TOP)) out.push(`              ${s(t.ms)}  ${t.file}: ${t.title.slice(0, 140)}`);
      out.push('', `  top ${TOP} hooks (of 50 ms or more)       s  file: hook`);
      for (const h of hooks.filter((x) => x.ms >= 50).sort((a, b) => b.ms - a.ms).slice(0, TOP)) out.push(`              ${s(h.ms)}  ${h.file}: ${h.title.slice(0, 140)}`);
      process.stdout.write(out.join('\n') + '\n');
      const target = process.env.FARMHAND_PROFILE_SUITE;
      if (target && target !== '1') fs.writeFileSync(target, JSON.stringify({ wallMs: wall, files: list, tests, hooks }, null, 1) + '\n');
    });
  }
}

module.exports = SuiteProfile;
