/**
 * What the kernel says about a step's outputs in their metadata, read as plain JSON (mirrors
 * agl_notebook/notebook/nbfile.py, `LIVE_VIEW_KEY` and `PROVENANCE_KEY`):
 *
 * - `agl_notebook_live`: a live display (a running step's widget view, or a question's form) whose bundle also holds
 *   a static placeholder. Its widget view is dead once the kernel is gone, so a saved notebook keeps the placeholder
 *   alone (`notebookForSaving`).
 * - `agl_notebook_provenance`: how a finished step's final display came to be: live or replayed, the record's date,
 *   the model requests made now, and for a live step whose recording no longer matched, what differed. Drawn as a
 *   badge (`badgeFor`); the output's data is never changed.
 *
 * Nothing here renders HTML: a badge is text.
 */

import { isObject, type JSONObject, type JSONValue } from './records.js';

/** Output metadata key marking a live display. */
export const LIVE_VIEW_KEY = 'agl_notebook_live';

/** Output metadata key of a finished step's provenance. */
export const PROVENANCE_KEY = 'agl_notebook_provenance';

/** The mime type of an ipywidgets view. */
export const WIDGET_MIME = 'application/vnd.jupyter.widget-view+json';

/** What a saved live display says when the kernel gave it no placeholder of its own. */
export const SAVED_PLACEHOLDER = 'agl_notebook: this output was running when the notebook was saved; run the cell again.';

/** Whether an output (nbformat JSON) is a live display that refers to a widget. */
export function isLiveWidgetOutput(output: unknown): output is JSONObject & { data: JSONObject } {
  return isObject(output) && isObject(output.metadata) && isObject(output.metadata[LIVE_VIEW_KEY]) &&
    isObject(output.data) && WIDGET_MIME in output.data;
}

/** A live display as it is saved: its data without the widget view (a placeholder text when nothing else is left). */
export function savedOutput(output: JSONObject & { data: JSONObject }): JSONObject {
  const data: JSONObject = { ...output.data };
  delete data[WIDGET_MIME];
  if (Object.keys(data).length === 0) {
    data['text/plain'] = SAVED_PLACEHOLDER;
  }
  return { ...output, data };
}

/**
 * A notebook's JSON as it is saved: every live display without its widget view. Returns the same object when no
 * output changes; never modifies its argument (changed cells and lists are copied).
 */
export function notebookForSaving<T>(notebook: T): T {
  if (!isObject(notebook) || !Array.isArray(notebook.cells)) {
    return notebook;
  }
  let changed = false;
  const cells = notebook.cells.map((cell: JSONValue) => {
    if (!isObject(cell) || !Array.isArray(cell.outputs) || !cell.outputs.some(isLiveWidgetOutput)) {
      return cell;
    }
    changed = true;
    return { ...cell, outputs: cell.outputs.map(o => (isLiveWidgetOutput(o) ? savedOutput(o) : o)) };
  });
  return changed ? ({ ...notebook, cells } as T) : notebook;
}

/** A provenance badge: its kind (which colour), its text and its tooltip. */
export interface Badge {
  kind: 'live' | 'replayed';
  text: string;
  title: string;
}

/** The day of an ISO 8601 time (`2026-12-01T04:09:25+00:00` → `2026-12-01`), or null when it is not one. */
export function dayOf(time: unknown): string | null {
  return typeof time === 'string' && /^\d{4}-\d{2}-\d{2}(T|$)/.test(time) ? time.slice(0, 10) : null;
}

function requests(n: number): string {
  return `${n} model request${n === 1 ? '' : 's'}`;
}

/** The badge an output's provenance metadata asks for, or null when it holds none this extension reads. */
export function badgeFor(provenance: unknown): Badge | null {
  if (!isObject(provenance) || provenance.version !== 1) {
    return null;
  }
  const day = dayOf(provenance.recorded_at);
  const when = typeof provenance.recorded_at === 'string' ? provenance.recorded_at : '';
  const backend = typeof provenance.backend === 'string' && provenance.backend ? ` with ${provenance.backend}` : '';
  const record = typeof provenance.record_id === 'string' ? ` ${provenance.record_id}` : '';
  if (provenance.source === 'replayed') {
    return {
      kind: 'replayed',
      text: ['replayed', ...(day ? [`recorded on ${day}`] : []), 'no model call'].join(' · '),
      title: `Replayed from the recording${record}${when ? ` made ${when}` : ''}${backend}: no model was called ` +
        'and no tool ran now.'
    };
  }
  if (provenance.source !== 'live') {
    return null;
  }
  const made = typeof provenance.model_requests === 'number' && provenance.model_requests >= 0 ?
    Math.floor(provenance.model_requests) : null;
  const miss = typeof provenance.miss === 'string' && provenance.miss ? provenance.miss : null;
  const parts = ['live', ...(made !== null ? [requests(made)] : [])];
  if (miss) {
    parts.push('recording did not match');
  } else if (!day) {
    parts.push('not recorded');
  }
  const title = [`Ran live now${backend}${made !== null ? `: ${requests(made)}` : ''}.`];
  if (miss) {
    title.push(`It ran live because its recording no longer matches: ${miss}`);
  }
  title.push(day ? `Recorded ${when}.` : 'Not recorded.');
  return { kind: 'live', text: parts.join(' · '), title: title.join(' ') };
}
