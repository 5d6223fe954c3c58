// Unit tests of the records block logic (lib/records.js, built by `npm run build:lib`). Run: npm test
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  blockWithoutPartial,
  holdsFinished,
  isFailure,
  isPartial,
  jsonEqual,
  metadataWithoutRecord,
  metadataWithoutSidecar,
  recordBelongsHere,
  sidecarFile,
  upsertRecord,
  upsertSidecar
} from '../lib/records.js';

const rec = (id, result = 1) => ({ kind: 'step', format: 1, id, result });

test('creates the block when absent', () => {
  assert.deepEqual(upsertRecord(undefined, rec('a')), { ok: true, block: { version: 1, records: [rec('a')] } });
  assert.deepEqual(upsertRecord(null, rec('a')).block, { version: 1, records: [rec('a')] });
});

test('replaces the record with the same id in place, keeps the rest and other keys', () => {
  const block = { version: 1, extra: { x: 1 }, records: [{ bogus: true }, rec('a'), 'junk', rec('b'), rec('a', 9)] };
  const result = upsertRecord(block, rec('a', 2));
  assert.ok(result.ok);
  assert.deepEqual(result.block, { version: 1, extra: { x: 1 }, records: [{ bogus: true }, rec('a', 2), 'junk', rec('b')] });
  assert.equal(block.records.length, 5, 'the input block is not modified');
});

test('appends a new record', () => {
  const result = upsertRecord({ version: 1, records: [rec('a')] }, rec('b'));
  assert.deepEqual(result.block.records.map(r => r.id), ['a', 'b']);
});

test('leaves an unusable block alone', () => {
  for (const block of ['text', [], { version: 2, records: [] }, { records: [] }, { version: 1, records: {} }]) {
    assert.equal(upsertRecord(block, rec('a')).ok, false, JSON.stringify(block));
  }
  assert.equal(upsertRecord(undefined, { kind: 'step' }).ok, false, 'a record without an id');
});

test('removes the output copy equal to the stored record, and the key when it was the last', () => {
  const metadata = { keep: 'me', agl_notebook: { version: 1, records: [rec('a')] } };
  assert.deepEqual(metadataWithoutRecord(metadata, rec('a')), { keep: 'me' });
  assert.deepEqual(metadata.agl_notebook.records.length, 1, 'the input metadata is not modified');
});

test('keeps the other records of an output', () => {
  const metadata = { agl_notebook: { version: 1, records: [rec('b'), rec('a')], note: 1 } };
  assert.deepEqual(metadataWithoutRecord(metadata, rec('a')), { agl_notebook: { version: 1, records: [rec('b')], note: 1 } });
});

test('never removes a copy that differs from the stored record, or from an unusable block', () => {
  assert.equal(metadataWithoutRecord({ agl_notebook: { version: 1, records: [rec('a', 5)] } }, rec('a')), null);
  assert.equal(metadataWithoutRecord({ agl_notebook: { version: 2, records: [rec('a')] } }, rec('a')), null);
  assert.equal(metadataWithoutRecord({ other: 1 }, rec('a')), null);
  assert.equal(metadataWithoutRecord(undefined, rec('a')), null);
});

test('compares JSON regardless of key order', () => {
  assert.ok(jsonEqual({ a: 1, b: [1, { c: null }] }, { b: [1, { c: null }], a: 1 }));
  assert.ok(!jsonEqual({ a: 1 }, { a: 1, b: undefined }));
  assert.ok(!jsonEqual([1, 2], [2, 1]));
  assert.ok(!jsonEqual({ a: [] }, { a: {} }));
});

test('compares own properties only, never what an object inherits', () => {
  // JSON.parse makes "__proto__" an own key; `k in b` would find Object.prototype under that name on any object.
  const protoKey = JSON.parse('{"__proto__": {}}');
  assert.ok(!jsonEqual(protoKey, { a: 1 }));
  assert.ok(!jsonEqual({ a: 1 }, protoKey));
  assert.ok(!jsonEqual(JSON.parse('{"constructor": {}, "x": 1}'), { y: 2, x: 1 }));
  assert.ok(!jsonEqual({ toString: {} }, { other: {} }));
  assert.ok(!jsonEqual(JSON.parse('{"hasOwnProperty": 1}'), { valueOf: 1 }));
  assert.ok(!jsonEqual({ a: 1, b: 2 }, Object.assign(Object.create({ a: 1 }), { b: 2, c: 3 })));
  assert.ok(!jsonEqual({ a: 1 }, Object.assign(Object.create({ a: 1 }), { z: 1 })));
  assert.ok(jsonEqual(protoKey, JSON.parse('{"__proto__": {}}')));
  assert.ok(jsonEqual(JSON.parse('{"__proto__": {"k": [1]}}'), JSON.parse('{"__proto__": {"k": [1]}}')));
  assert.ok(!jsonEqual(JSON.parse('{"__proto__": {"k": [1]}}'), JSON.parse('{"__proto__": {"k": [2]}}')));
});

test('a record belongs to the notebook holding its cell, or anywhere when its cell is unknown', () => {
  assert.equal(recordBelongsHere('c2', ['c1', 'c2']), true);
  assert.equal(recordBelongsHere('other-notebooks-cell', ['c1', 'c2']), false);
  assert.equal(recordBelongsHere('c1', []), false);
  assert.equal(recordBelongsHere(null, ['c1']), true);
  assert.equal(recordBelongsHere(null, []), true);
});

// Partial records: a step waiting for a person (docs/recordings.md, "Partial records").

const partial = (id) => ({
  ...rec(id, null),
  transcript: [],
  partial: { waiting: 'approval', tool_call_id: 'toolu_01_0', tool: 'send_mail', later: { unknown: [1] } }
});

test('keeps a partial record whole, unknown fields included, and replaces it by the finished one', () => {
  const stored = upsertRecord({ version: 1, records: [rec('a')] }, partial('b'));
  assert.ok(stored.ok);
  assert.deepEqual(stored.block.records, [rec('a'), partial('b')], 'kept as sent');
  const finished = upsertRecord(stored.block, rec('b', 7));
  assert.deepEqual(finished.block.records, [rec('a'), rec('b', 7)], 'the finished record in its place');
});

test('a partial record never replaces a finished record of the same id', () => {
  const block = { version: 1, records: [rec('a'), rec('b', 3)] };
  const result = upsertRecord(block, partial('b'));
  assert.ok(result.ok);
  assert.deepEqual(result.block, { version: 1, records: [rec('a'), rec('b', 3)] }, 'the finished record kept');
  assert.ok(holdsFinished(block, 'b') && !holdsFinished(block, 'c'));
  assert.ok(!holdsFinished({ version: 1, records: [partial('b')] }, 'b'), 'a partial record is not a finished one');
  assert.ok(!holdsFinished({ version: 2, records: [rec('b')] }, 'b'), 'an unusable block holds nothing');
  assert.ok(isPartial(partial('b')) && !isPartial(rec('b')));
  assert.deepEqual(upsertRecord({ version: 1, records: [partial('b')] }, partial('b')).block.records, [partial('b')]);
});

test('a discard removes the partial record only, never a finished one', () => {
  const block = { version: 1, note: 'x', records: [rec('a'), partial('b'), 'junk'] };
  assert.deepEqual(blockWithoutPartial(block, 'b'), { version: 1, note: 'x', records: [rec('a'), 'junk'] });
  assert.equal(blockWithoutPartial(block, 'a'), null, 'a finished record with the id stays');
  assert.equal(blockWithoutPartial(block, 'c'), null, 'nothing to remove');
  assert.equal(blockWithoutPartial({ version: 2, records: [partial('b')] }, 'b'), null, 'an unusable block is left');
  assert.equal(block.records.length, 3, 'the input block is not modified');
});

const naming = (key, lines = 3) => ({ file: `${key}.agl.jsonl`, key, lines, bytes: 120 * lines, sha256: 'ab'.repeat(32) });

test('a sidecar naming goes into the block beside the records, replacing the one of the same file', () => {
  assert.deepEqual(upsertSidecar(undefined, naming('m')), { ok: true, block: { version: 1, records: [], sidecars: [naming('m')] } });
  const block = { version: 1, records: [rec('a')], extra: 1, sidecars: [naming('m'), naming('n'), naming('m', 1)] };
  const result = upsertSidecar(block, naming('m', 9));
  assert.ok(result.ok);
  assert.deepEqual(result.block, { version: 1, records: [rec('a')], extra: 1, sidecars: [naming('m', 9), naming('n')] });
  assert.equal(block.sidecars.length, 3, 'the input block is not modified');
  assert.deepEqual(upsertSidecar({ version: 1, records: [] }, naming('n')).block.sidecars, [naming('n')]);
});

test('a record put into a block keeps its sidecar namings', () => {
  const result = upsertRecord({ version: 1, records: [], sidecars: [naming('m')] }, rec('a'));
  assert.deepEqual(result.block, { version: 1, records: [rec('a')], sidecars: [naming('m')] });
});

test('a naming that could point outside the notebook folder, or an unusable block, is left alone', () => {
  for (const bad of [{ ...naming('m'), file: '../m.agl.jsonl' }, { ...naming('m'), file: '/etc/m.agl.jsonl' },
    { ...naming('m'), file: 'm.json' }, { key: 'm' }, 'm.agl.jsonl', null]) {
    assert.equal(sidecarFile(bad), null, JSON.stringify(bad));
    assert.equal(upsertSidecar(undefined, bad).ok, false, JSON.stringify(bad));
  }
  assert.equal(sidecarFile(naming('oracle-map_2')), 'oracle-map_2.agl.jsonl');
  for (const block of ['text', { version: 2, records: [] }, { version: 1, records: [], sidecars: {} }]) {
    assert.equal(upsertSidecar(block, naming('m')).ok, false, JSON.stringify(block));
  }
});

test("the naming's output copy is removed when equal, and the block with it when nothing is left", () => {
  const metadata = { keep: 'me', agl_notebook: { version: 1, records: [], sidecars: [naming('m')] } };
  assert.deepEqual(metadataWithoutSidecar(metadata, naming('m')), { keep: 'me' });
  assert.equal(metadata.agl_notebook.sidecars.length, 1, 'the input metadata is not modified');
  const both = { agl_notebook: { version: 1, records: [rec('a')], sidecars: [naming('m')] } };
  assert.deepEqual(metadataWithoutSidecar(both, naming('m')), { agl_notebook: { version: 1, records: [rec('a')] } });
  assert.deepEqual(metadataWithoutRecord(both, rec('a')), { agl_notebook: { version: 1, records: [], sidecars: [naming('m')] } },
    'removing the record keeps the naming');
  assert.equal(metadataWithoutSidecar(metadata, naming('m', 4)), null, 'a differing copy is never removed');
  assert.equal(metadataWithoutSidecar({ agl_notebook: { version: 1, records: [rec('a')] } }, naming('m')), null);
});

// Failure records: a map item that failed or never ran (docs/recordings.md, "Failure records").

const failure = (id) => ({
  kind: 'failure', format: 1, id, parts: {}, occurrence: 0, role: 'r', backend: 'scripted:x', input: 1,
  failure: { status: 'failed', type: 'ToolError', message: 'boom' }
});

test('a failure record is not a finished one: a partial record of a later run replaces it', () => {
  const block = { version: 1, records: [rec('a'), failure('b')] };
  assert.ok(isFailure(failure('b')) && !isFailure(rec('b')) && !isFailure(partial('b')));
  assert.ok(!holdsFinished(block, 'b'), 'a failure record holds no finished step');
  const waiting = upsertRecord(block, partial('b'));
  assert.deepEqual(waiting.block.records, [rec('a'), partial('b')], 'the step waiting again is kept');
  const finished = upsertRecord(waiting.block, rec('b', 5));
  assert.deepEqual(finished.block.records, [rec('a'), rec('b', 5)]);
});

test('a failure record never replaces a finished record of the same id', () => {
  const block = { version: 1, records: [rec('a'), rec('b', 3)] };
  assert.deepEqual(upsertRecord(block, failure('b')).block, block, 'the finished record kept');
  assert.deepEqual(upsertRecord({ version: 1, records: [failure('b')] }, failure('b')).block.records, [failure('b')]);
});

test('a replacing record keeps the cells the notebook named for its id, as the kernel adds them', () => {
  const cell = (id, source) => (id === null ? { source } : { id, source });
  const held = { ...rec('a'), cells: [cell('c1', 's1'), cell(null, 's2'), cell('c3', 's3')] };
  const sent = { ...rec('a', 2), cells: [cell('c3', 's3b'), cell('c4', 's4'), cell(null, 's2')] };
  const result = upsertRecord({ version: 1, records: [held] }, sent);
  assert.ok(result.ok);
  assert.deepEqual(result.block.records, [
    { ...rec('a', 2), cells: [cell('c1', 's1'), cell(null, 's2'), cell('c3', 's3b'), cell('c4', 's4')] }
  ]);
  // Nothing new: the record itself; a record with no cells held: as sent.
  assert.equal(upsertRecord({ version: 1, records: [sent] }, sent).block.records[0], sent);
  assert.equal(upsertRecord({ version: 1, records: [rec('a')] }, sent).block.records[0], sent);
});

test('past 32 cells the oldest go and the record says some went', () => {
  const many = Array.from({ length: 30 }, (_, i) => ({ id: `old${i}`, source: `s${i}` }));
  const held = { ...rec('a'), cells: many };
  const sent = { ...rec('a'), cells: Array.from({ length: 5 }, (_, i) => ({ id: `new${i}`, source: `n${i}` })) };
  const merged = upsertRecord({ version: 1, records: [held] }, sent).block.records[0];
  assert.equal(merged.cells.length, 32);
  assert.deepEqual(merged.cells[0], { id: 'old3', source: 's3' });
  assert.deepEqual(merged.cells[31], { id: 'new4', source: 'n4' });
  assert.equal(merged.cells_dropped, true);
});
