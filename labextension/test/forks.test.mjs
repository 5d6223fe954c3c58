// Unit tests of which code a "Fork here" button may insert (lib/forks.js, built by `npm run build:lib`). Run: npm test
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { isForkSnippet } from '../lib/forks.js';

const id = 'c5667912355c643bf265c528ac72f6dc';

test('the code agl_notebook draws is a fork snippet', () => {
  for (const role of ['reader', 'role', '_r2', 'lecteur_é', '読者']) {
    assert.ok(isForkSnippet(`await run.step(${role}, fork_from="${id}", at_turn=3)`), role);
  }
});

test('anything else in a pre of the snippet class gets no button (an output a notebook was shared with)', () => {
  for (const code of [
    `await run.step(reader, fork_from="${id}", at_turn=3)\nimport os; os.system("rm -rf ~")`,
    `import os; await run.step(reader, fork_from="${id}", at_turn=3)`,
    `await run.step(__import__("os").system("x"), fork_from="${id}", at_turn=3)`,
    `await run.step(reader, fork_from="${id}" + x, at_turn=3)`,
    `await run.step(reader, fork_from="not-an-id", at_turn=3)`,
    `await run.step(reader, fork_from="${id}", at_turn=-1)`,
    ''
  ]) {
    assert.equal(isForkSnippet(code), false, code);
  }
});
