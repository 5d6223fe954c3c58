/**
 * The records block as plain JSON: `{"version": 1, "records": [record, ...]}` under the key `agl_notebook`, in the
 * notebook metadata (the home of recordings) and in an output's metadata (the copy a finished step carries). A block
 * may also name sidecar files beside the notebook, `"sidecars": [naming, ...]`, which hold a large map's records
 * (agl_notebook/replay/sidecar.py); a naming is kept as it came, by its `file`.
 *
 * Mirrors agl_notebook/notebook/nbfile.py and agl_notebook/replay/records.py. Records are data only: nothing here
 * runs, renders or interprets their content beyond reading `id`.
 */

/** The key of the records block in notebook metadata and in output metadata. */
export const METADATA_KEY = 'agl_notebook';

/** The records block version this extension reads and writes. */
export const BLOCK_VERSION = 1;

/** The key, in a records block, of the list of sidecar namings. */
export const SIDECARS_KEY = 'sidecars';

export type JSONValue = null | boolean | number | string | JSONValue[] | JSONObject;
export interface JSONObject {
  [key: string]: JSONValue;
}

/** Whether `value` is a JSON object (not null, not a list). */
export function isObject(value: unknown): value is JSONObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A record's id, or null when it has none (a record without a string id is not one this extension can place). */
export function recordId(record: unknown): string | null {
  return isObject(record) && typeof record.id === 'string' && record.id !== '' ? record.id : null;
}

/** Why a block cannot be written to without losing what it holds, or null when it can. */
export function blockProblem(block: unknown): string | null {
  if (!isObject(block)) {
    return 'expected an object with "version" and "records"';
  }
  if (block.version !== BLOCK_VERSION) {
    return `this extension writes version ${BLOCK_VERSION}, found ${JSON.stringify(block.version) ?? 'none'}`;
  }
  if (!Array.isArray(block.records)) {
    return '"records" is not a list';
  }
  return null;
}

/** Whether a record is partial: the progress of a step waiting for a person (it has a `partial` field). */
export function isPartial(record: unknown): boolean {
  return isObject(record) && 'partial' in record;
}

/**
 * Whether a record is a failure record: a map item that failed or never ran (kind `failure`, docs/recordings.md,
 * "Failure records"). It stands in for a step until the step finishes, so it is not a finished record.
 */
export function isFailure(record: unknown): boolean {
  return isObject(record) && record.kind === 'failure';
}

/** Whether a record stands in for a step that has not finished: a partial record or a failure record. */
export function isUnfinished(record: unknown): boolean {
  return isPartial(record) || isFailure(record);
}

/** Whether a usable block holds a finished (neither partial nor failure) record with this id. */
export function holdsFinished(block: unknown, id: string): boolean {
  if (blockProblem(block) !== null) {
    return false;
  }
  return ((block as JSONObject).records as JSONValue[]).some(item => recordId(item) === id && !isUnfinished(item));
}

/** The result of putting a record into a block. */
export type Upsert = { ok: true; block: JSONObject } | { ok: false; problem: string };

/**
 * The block with `record` inserted, or in place of the record with the same id (later duplicates of that id are
 * dropped: readers keep one record per id). Creates the block when it is absent; keeps every other record, readable
 * or not, and every other key of the block. An unusable block is left alone: writing it would lose what it holds.
 *
 * A partial record never replaces a finished one: the block holding a finished record with its id is returned as
 * it is (a step waiting in mode `refresh`; the kernel keeps that partial record in its session only).
 */
export function upsertRecord(block: unknown, record: JSONObject): Upsert {
  const id = recordId(record);
  if (id === null) {
    return { ok: false, problem: 'the record has no id' };
  }
  if (block === undefined || block === null) {
    return { ok: true, block: { version: BLOCK_VERSION, records: [record] } };
  }
  const problem = blockProblem(block);
  if (problem !== null) {
    return { ok: false, problem };
  }
  if (isUnfinished(record) && holdsFinished(block, id)) {
    return { ok: true, block: block as JSONObject };
  }
  const current = (block as JSONObject).records as JSONValue[];
  const records: JSONValue[] = [];
  let placed = false;
  for (const item of current) {
    if (recordId(item) !== id) {
      records.push(item);
    } else if (!placed) {
      records.push(withCellsOf(item, record));
      placed = true;
    }
  }
  if (!placed) {
    records.push(record);
  }
  return { ok: true, block: { ...(block as JSONObject), records } };
}

/** The most cells a record keeps: `MAX_CELLS` of agl_notebook/replay/records.py. */
export const MAX_CELLS = 32;

/**
 * `record` with the cells of `replaced` (the record of its id the notebook held) it does not name, as the kernel's
 * `with_cells` adds them: the notebook's cells first, then the record's; a cell with an id once (its latest source),
 * one without an id once per source; past `MAX_CELLS` the oldest go and `cells_dropped` says so. The kernel that
 * sent the record may not know every cell that used it (a record recorded again after a restart, another kernel's
 * replay), and `gc` judges a record unused by its cells: losing one could remove a record a cell still replays.
 */
export function withCellsOf(replaced: unknown, record: JSONObject): JSONObject {
  if (!isObject(replaced) || !Array.isArray(replaced.cells)) {
    return record;
  }
  const cells: JSONObject[] = [];
  const add = (use: JSONValue): void => {
    if (!isObject(use) || typeof use.source !== 'string') {
      return;
    }
    const id = typeof use.id === 'string' ? use.id : null;
    if (id === null) {
      if (!cells.some(c => c.source === use.source)) {
        cells.push(use);
      }
      return;
    }
    const same = cells.findIndex(c => c.id === id);
    if (same !== -1) {
      if (cells[same].source === use.source) {
        return;
      }
      cells.splice(same, 1);
    }
    cells.push(use);
  };
  replaced.cells.forEach(add);
  (Array.isArray(record.cells) ? record.cells : []).forEach(add);
  const dropped = replaced.cells_dropped === true || record.cells_dropped === true || cells.length > MAX_CELLS;
  const merged: JSONObject = { ...record, cells: cells.slice(-MAX_CELLS) };
  if (dropped) {
    merged.cells_dropped = true;
  }
  return jsonEqual(merged, record) ? record : merged;
}

/**
 * The block without the partial record `id` (a record with a `partial` field: the progress of a step that waited
 * for a person), or null when it holds no such record. A finished record with the id is never removed; every other
 * record and key is kept.
 */
export function blockWithoutPartial(block: unknown, id: string): JSONObject | null {
  if (blockProblem(block) !== null) {
    return null;
  }
  const records = (block as JSONObject).records as JSONValue[];
  const kept = records.filter(item => !(recordId(item) === id && isPartial(item)));
  return kept.length === records.length ? null : { ...(block as JSONObject), records: kept };
}

function hasOwn(object: object, key: string): boolean {
  return Object.prototype.hasOwnProperty.call(object, key);
}

/** Whether two JSON values are equal (object key order aside). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) {
    return true;
  }
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((item, i) => jsonEqual(item, b[i]));
  }
  if (isObject(a)) {
    if (!isObject(b)) {
      return false;
    }
    // Own properties only: `k in b` would find what b inherits (JSON.parse makes "__proto__" an own key, and
    // `"__proto__" in b` is true of every object), so {"__proto__": {}} would equal any one-key object.
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length && keys.every(k => hasOwn(b, k) && jsonEqual(a[k], b[k]));
  }
  return false;
}

/**
 * An output's metadata without the copy of `record` (same id and same content), or null when it holds no such copy.
 * Drops the block's key when no record remains in it; keeps everything else. Only a copy equal to the stored record
 * is removed, so an output never loses a record the notebook metadata does not hold.
 */
export function metadataWithoutRecord(metadata: unknown, record: JSONObject): JSONObject | null {
  const id = recordId(record);
  if (id === null || !isObject(metadata)) {
    return null;
  }
  const block = metadata[METADATA_KEY];
  if (blockProblem(block) !== null) {
    return null;
  }
  const records = (block as JSONObject).records as JSONValue[];
  const kept = records.filter(item => !(recordId(item) === id && jsonEqual(item, record)));
  if (kept.length === records.length) {
    return null;
  }
  return withBlock(metadata, { ...(block as JSONObject), records: kept });
}

/** Output metadata holding `block`, or without the block's key when the block holds no record and names no file. */
function withBlock(metadata: JSONObject, block: JSONObject): JSONObject {
  const next: JSONObject = { ...metadata };
  const records = block.records as JSONValue[];
  const sidecars = block[SIDECARS_KEY];
  if (records.length === 0 && !(Array.isArray(sidecars) && sidecars.length > 0)) {
    delete next[METADATA_KEY];
  } else {
    next[METADATA_KEY] = block;
  }
  return next;
}

/**
 * A sidecar naming's file name, or null when it is not a naming this extension can place: an object whose `file`
 * is a plain file name (no folder: a naming never points outside the notebook's folder) ending in `.agl.jsonl`.
 */
export function sidecarFile(naming: unknown): string | null {
  if (!isObject(naming) || typeof naming.file !== 'string') {
    return null;
  }
  const file = naming.file;
  return /^[A-Za-z0-9_-]{1,100}\.agl\.jsonl$/.test(file) ? file : null;
}

/**
 * The block naming the sidecar by `naming`: in place of a naming of the same file (later duplicates dropped), or
 * added last. Creates the block when it is absent; keeps every record and every other key. An unusable block, or a
 * naming without a file this extension can place, is left alone.
 */
export function upsertSidecar(block: unknown, naming: JSONObject): Upsert {
  const file = sidecarFile(naming);
  if (file === null) {
    return { ok: false, problem: 'the naming has no sidecar file name' };
  }
  if (block === undefined || block === null) {
    return { ok: true, block: { version: BLOCK_VERSION, records: [], [SIDECARS_KEY]: [naming] } };
  }
  const problem = blockProblem(block);
  if (problem !== null) {
    return { ok: false, problem };
  }
  const current = (block as JSONObject)[SIDECARS_KEY];
  if (current !== undefined && !Array.isArray(current)) {
    return { ok: false, problem: `"${SIDECARS_KEY}" is not a list` };
  }
  const namings: JSONValue[] = [];
  let placed = false;
  for (const item of current ?? []) {
    if (sidecarFile(item) !== file) {
      namings.push(item);
    } else if (!placed) {
      namings.push(naming);
      placed = true;
    }
  }
  if (!placed) {
    namings.push(naming);
  }
  return { ok: true, block: { ...(block as JSONObject), [SIDECARS_KEY]: namings } };
}

/**
 * An output's metadata without the copy of `naming` (equal to it), or null when it holds no such copy. Drops the
 * block's key when it then holds no record and names no file; keeps everything else.
 */
export function metadataWithoutSidecar(metadata: unknown, naming: JSONObject): JSONObject | null {
  if (sidecarFile(naming) === null || !isObject(metadata)) {
    return null;
  }
  const block = metadata[METADATA_KEY];
  if (blockProblem(block) !== null) {
    return null;
  }
  const namings = (block as JSONObject)[SIDECARS_KEY];
  if (!Array.isArray(namings)) {
    return null;
  }
  const kept = namings.filter(item => !jsonEqual(item, naming));
  if (kept.length === namings.length) {
    return null;
  }
  const next: JSONObject = { ...(block as JSONObject) };
  if (kept.length === 0) {
    delete next[SIDECARS_KEY];
  } else {
    next[SIDECARS_KEY] = kept;
  }
  return withBlock(metadata, next);
}

/**
 * Whether a record the kernel sent from cell `cellId` belongs to the notebook whose cell ids are `cellIds`.
 *
 * Several notebooks may share one kernel (JupyterLab: "use the kernel of another notebook"), and each one's
 * extension hears every record the kernel sends: only the notebook holding the cell keeps it. A record whose cell
 * is unknown (`null`: the kernel was not told) is kept, as before there was a cell id to tell.
 */
export function recordBelongsHere(cellId: string | null, cellIds: Iterable<string>): boolean {
  if (cellId === null) {
    return true;
  }
  for (const id of cellIds) {
    if (id === cellId) {
      return true;
    }
  }
  return false;
}
