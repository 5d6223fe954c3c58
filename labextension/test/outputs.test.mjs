// Unit tests of what the extension reads from outputs (lib/outputs.js, built by `npm run build:lib`). Run: npm test
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { badgeFor, dayOf, notebookForSaving, SAVED_PLACEHOLDER, WIDGET_MIME } from '../lib/outputs.js';

const widget = { version_major: 2, version_minor: 0, model_id: 'abc' };
const live = (data, extra = {}) => ({
  output_type: 'display_data', data, metadata: { agl_notebook_live: { version: 1 }, ...extra }
});
const notebook = outputs => ({
  nbformat: 4, metadata: { kernelspec: {} },
  cells: [{ cell_type: 'markdown', source: 'x' }, { cell_type: 'code', source: 'y', outputs }]
});

test('a live display is saved with its placeholder, not its widget view', () => {
  const output = live({ [WIDGET_MIME]: widget, 'text/plain': 'was running', 'text/html': '<div>was running</div>' },
                      { other: 1 });
  const input = notebook([output, { output_type: 'stream', name: 'stdout', text: 'hi' }]);
  const saved = notebookForSaving(input);
  assert.deepEqual(saved.cells[1].outputs[0], {
    output_type: 'display_data', data: { 'text/plain': 'was running', 'text/html': '<div>was running</div>' },
    metadata: { agl_notebook_live: { version: 1 }, other: 1 }
  });
  assert.deepEqual(saved.cells[1].outputs[1], input.cells[1].outputs[1]);
  assert.equal(saved.cells[0], input.cells[0], 'unchanged cells are kept as they are');
  assert.ok(WIDGET_MIME in input.cells[1].outputs[0].data, 'the model JSON given is not modified');
});

test('a live display with nothing but a widget view is saved as the placeholder text', () => {
  const saved = notebookForSaving(notebook([live({ [WIDGET_MIME]: widget })]));
  assert.deepEqual(saved.cells[1].outputs[0].data, { 'text/plain': SAVED_PLACEHOLDER });
});

test('widgets that are not agl_notebook live displays, and damaged notebooks, are saved as they are', () => {
  const other = notebook([{ output_type: 'display_data', data: { [WIDGET_MIME]: widget }, metadata: {} },
                          { output_type: 'display_data', data: { [WIDGET_MIME]: widget },
                            metadata: { agl_notebook_live: true } }]);
  assert.equal(notebookForSaving(other), other);
  for (const damaged of [null, 'text', [], { cells: 'no' }, { cells: [null, { outputs: 'no' }, { outputs: [null] }] }]) {
    assert.equal(notebookForSaving(damaged), damaged);
  }
});

const provenance = extra => ({
  version: 1, source: 'live', model_requests: 1, recorded_at: '2026-12-01T04:09:25+00:00', record_id: 'r1',
  backend: 'scripted:abc', ...extra
});

test('a replayed step: its record date and no model call', () => {
  const badge = badgeFor(provenance({ source: 'replayed', model_requests: 0 }));
  assert.deepEqual(badge.kind, 'replayed');
  assert.equal(badge.text, 'replayed · recorded on 2026-12-01 · no model call');
  assert.match(badge.title, /recording r1 made 2026-12-01T04:09:25\+00:00 with scripted:abc: no model was called/);
});

test('a live step: the model requests made now; not recorded; a recording that did not match', () => {
  assert.equal(badgeFor(provenance()).text, 'live · 1 model request');
  assert.equal(badgeFor(provenance()).kind, 'live');
  assert.equal(badgeFor(provenance({ model_requests: 3, recorded_at: null })).text, 'live · 3 model requests · not recorded');
  const missed = badgeFor(provenance({ miss: 'The nearest differs in: instructions.', differing: ['instructions'] }));
  assert.equal(missed.text, 'live · 1 model request · recording did not match');
  assert.match(missed.title, /no longer matches: The nearest differs in: instructions\./);
});

test('provenance this extension cannot read draws no badge', () => {
  for (const bad of [undefined, null, 'live', [], {}, { version: 2, source: 'live' }, { version: 1, source: 'other' }]) {
    assert.equal(badgeFor(bad), null, JSON.stringify(bad));
  }
  assert.equal(badgeFor(provenance({ model_requests: 'many' })).text, 'live');
  assert.equal(badgeFor(provenance({ source: 'replayed', recorded_at: 'yesterday' })).text, 'replayed · no model call');
});

test('the day of an ISO time', () => {
  assert.equal(dayOf('2026-12-01T04:09:25+00:00'), '2026-12-01');
  assert.equal(dayOf('2026-12-01'), '2026-12-01');
  assert.equal(dayOf('01/12/2026'), null);
  assert.equal(dayOf(20261201), null);
});
