/**
 * One notebook document's end of the comm target `agl_notebook`, protocol version 1 (the kernel's end and the
 * protocol are in agl_notebook/notebook/frontend.py):
 *
 * - kernel → frontend, on comm open: `{"op": "hello", "version": 1}`; the answer is
 *   `{"op": "records", "path": <notebook path>, "block": <metadata["agl_notebook"] as the model holds it, or null>}`.
 * - kernel → frontend: `{"op": "record", "cell_id": <id or null>, "record": <record>}`; the record goes into the
 *   notebook metadata (replacing the one with the same id), its copy leaves the step's output metadata, the notebook
 *   becomes dirty, and the answer is `{"op": "stored", "id": <record id>}`. A notebook without that cell (another
 *   notebook sharing the kernel ran it) ignores the message. A partial record (a step waiting for a person: it has a
 *   `partial` field) comes the same way when the step starts waiting; its finished record replaces it by id. A
 *   partial record never replaces a finished one with its id (a step waiting in mode `refresh`): it is not stored
 *   nor acknowledged, and the kernel keeps it in its session only.
 * - kernel → frontend: `{"op": "discard", "id": <record id>}`: a waiting step was interrupted on purpose (or failed);
 *   its partial record leaves the notebook metadata. A finished record with that id is never removed.
 * - kernel → frontend: `{"op": "sidecar", "cell_id": <id or null>, "sidecar": <naming>}` when a map's final display
 *   names its sidecar file: the naming goes into the notebook metadata block's `"sidecars"` (replacing the one of the
 *   same file), its copy leaves the map's output metadata, and the answer is `{"op": "stored", "sidecar": <file>}`.
 *
 * Records are JSON data: nothing from a record is executed or rendered here.
 */

import type { ICodeCellModel } from '@jupyterlab/cells';
import type { INotebookModel, NotebookPanel } from '@jupyterlab/notebook';
import type { IOutputAreaModel } from '@jupyterlab/outputarea';
import type { Kernel, KernelMessage } from '@jupyterlab/services';

import {
  blockWithoutPartial,
  holdsFinished,
  isObject,
  isUnfinished,
  type JSONObject,
  jsonEqual,
  METADATA_KEY,
  metadataWithoutRecord,
  metadataWithoutSidecar,
  recordBelongsHere,
  recordId,
  sidecarFile,
  type Upsert,
  upsertRecord,
  upsertSidecar
} from './records.js';

/** What an output's metadata becomes without the copy of what was stored, or null when it holds no such copy. */
type Strip = (metadata: unknown) => JSONObject | null;

/** The comm target the kernel opens. */
export const TARGET = 'agl_notebook';

/** The protocol version this extension speaks. */
export const PROTOCOL = 1;

/**
 * How long to keep watching a cell's outputs for the copy of a stored record. The kernel updates the step's display
 * (which adds the copy) just before it sends the record, and the output model may be updated after the comm message
 * has been handled.
 */
export const WATCH_MS = 15000;

type Context = NotebookPanel['context'];

/** The link between one notebook document and whichever kernel its session runs. */
export class NotebookLink {
  constructor(private readonly context: Context) {
    this.onCommOpen = this.onCommOpen.bind(this);
    const session = context.sessionContext;
    session.kernelChanged.connect((_, change) => {
      if (change.oldValue) {
        this.unregister(change.oldValue);
      }
      this.register(change.newValue);
    }, this);
    this.register(session.session?.kernel ?? null);
    session.ready.then(() => this.register(session.session?.kernel ?? null)).catch(() => undefined);
    context.disposed.connect(() => this.dispose(), this);
  }

  /** Stop watching outputs and leave the kernel's comm target. */
  dispose(): void {
    if (this.disposed) {
      return;
    }
    this.disposed = true;
    for (const stop of [...this.watches]) {
      stop();
    }
    const kernel = this.context.sessionContext.session?.kernel;
    if (kernel) {
      this.unregister(kernel);
    }
  }

  /** Register the comm target on a kernel connection (once per connection; it survives restarts). */
  private register(kernel: Kernel.IKernelConnection | null): void {
    if (this.disposed || !kernel || kernel.isDisposed || this.registered.has(kernel)) {
      return;
    }
    this.registered.add(kernel);
    kernel.registerCommTarget(TARGET, this.onCommOpen);
    kernel.iopubMessage.connect(this.onIOPub, this);
  }

  private unregister(kernel: Kernel.IKernelConnection): void {
    kernel.iopubMessage.disconnect(this.onIOPub, this);
    if (!kernel.isDisposed) {
      kernel.removeCommTarget(TARGET, this.onCommOpen);
    }
    this.registered.delete(kernel);
  }

  /**
   * Adopt a comm the kernel opened before this page connected to it (the page was reloaded, or opened in another
   * tab, while the kernel kept running): its messages reach this page, but no comm of this page has their id, so the
   * kernel connection drops them. A `record` message on such a comm is handled and answered on a comm of the same id.
   */
  private onIOPub(kernel: Kernel.IKernelConnection, msg: KernelMessage.IIOPubMessage): void {
    if (this.disposed || msg.header.msg_type !== 'comm_msg' || !kernel.handleComms) {
      return;
    }
    const content = (msg as KernelMessage.ICommMsgMsg<'iopub'>).content;
    if (kernel.hasComm(content.comm_id) || !isRecordMessage(content.data)) {
      return;
    }
    const comm = kernel.createComm(TARGET, content.comm_id);
    comm.onMsg = (message: KernelMessage.ICommMsgMsg) => this.handle(comm, message.content.data);
    this.handle(comm, content.data);
  }

  private onCommOpen(comm: Kernel.IComm, msg: KernelMessage.ICommOpenMsg): void {
    comm.onMsg = (message: KernelMessage.ICommMsgMsg) => this.handle(comm, message.content.data);
    this.handle(comm, msg.content.data);
  }

  private handle(comm: Kernel.IComm, data: unknown): void {
    if (this.disposed || !isObject(data)) {
      return;
    }
    if (data.op === 'hello') {
      const block = this.model?.getMetadata(METADATA_KEY);
      send(comm, { op: 'records', path: this.context.localPath, block: block === undefined ? null : block });
    } else if (data.op === 'record') {
      const id = this.store(data.record, typeof data.cell_id === 'string' ? data.cell_id : null);
      if (id !== null) {
        send(comm, { op: 'stored', id });
      }
    } else if (data.op === 'discard' && typeof data.id === 'string') {
      const model = this.model;
      const block = model ? blockWithoutPartial(model.getMetadata(METADATA_KEY), data.id) : null;
      if (model && block !== null) {
        model.setMetadata(METADATA_KEY, block);
      }
    } else if (data.op === 'sidecar') {
      const file = this.storeSidecar(data.sidecar, typeof data.cell_id === 'string' ? data.cell_id : null);
      if (file !== null) {
        send(comm, { op: 'stored', sidecar: file });
      }
    }
  }

  /** Put a record into the notebook metadata and remove its output copy; its id, or null when not stored. */
  private store(record: unknown, cellId: string | null): string | null {
    const id = recordId(record);
    if (id === null || !isObject(record)) {
      console.warn('agl-notebook: ignored a record without an id');
      return null;
    }
    const model = this.model;
    if (model && isUnfinished(record) && holdsFinished(model.getMetadata(METADATA_KEY), id)) {
      // A partial or failure record never replaces a finished one (a step waiting, or a map item failing, in mode
      // `refresh`): the kernel keeps it in its session only, and it is not acknowledged.
      return null;
    }
    const stored = this.keep(`record ${id}`, cellId, block => upsertRecord(block, record),
                             metadata => metadataWithoutRecord(metadata, record));
    return stored ? id : null;
  }

  /** Put a map's sidecar naming into the notebook metadata and remove its output copy; its file, or null. */
  private storeSidecar(naming: unknown, cellId: string | null): string | null {
    const file = sidecarFile(naming);
    if (file === null || !isObject(naming)) {
      console.warn('agl-notebook: ignored a sidecar naming without a sidecar file name');
      return null;
    }
    const stored = this.keep(`the naming of ${file}`, cellId, block => upsertSidecar(block, naming),
                             metadata => metadataWithoutSidecar(metadata, naming));
    return stored ? file : null;
  }

  /** Change the notebook metadata's block with `upsert` and strip the copies from the cell's outputs. */
  private keep(what: string, cellId: string | null, upsert: (block: unknown) => Upsert, strip: Strip): boolean {
    const model = this.model;
    if (!model) {
      return false;
    }
    if (!recordBelongsHere(cellId, cellIds(model))) {
      return false; // another notebook sharing this kernel ran the step: its extension keeps it
    }
    const current: unknown = model.getMetadata(METADATA_KEY);
    const result = upsert(current);
    if (!result.ok) {
      // It stays in the output's metadata, where the command line can move it later.
      console.warn(`agl-notebook: ${what} not stored: the notebook's ${METADATA_KEY} metadata is unusable ` +
                   `(${result.problem}); fix or remove it. It stays in the cell's output.`);
      return false;
    }
    if (!jsonEqual(current, result.block)) {
      model.setMetadata(METADATA_KEY, result.block); // makes the notebook dirty: the next save keeps it
    }
    if (this.removeCopies(strip, cellId) === 0) {
      this.watch(strip, cellId);
    }
    return true;
  }

  /** The code cells that may hold the record's output copy: the record's cell, or every code cell. */
  private cells(cellId: string | null): ICodeCellModel[] {
    const model = this.model;
    if (!model) {
      return [];
    }
    const code: ICodeCellModel[] = [];
    for (const cell of model.cells) {
      if (cell.type === 'code') {
        if (cellId !== null && cell.id === cellId) {
          return [cell as ICodeCellModel];
        }
        code.push(cell as ICodeCellModel);
      }
    }
    return code;
  }

  /** Remove the copies `strip` strips from the outputs' metadata; how many outputs changed. */
  private removeCopies(strip: Strip, cellId: string | null): number {
    let removed = 0;
    for (const cell of this.cells(cellId)) {
      removed += stripOutputs(cell.outputs, strip);
    }
    return removed;
  }

  /** Watch the cells' outputs for a while and remove the copy once it arrives. */
  private watch(strip: Strip, cellId: string | null): void {
    const outputs = this.cells(cellId).map(cell => cell.outputs);
    let pending: ReturnType<typeof setTimeout> | null = null;
    const retry = (): void => {
      // Not inside the change notification: the output area is still handling the change that emitted it.
      if (pending === null) {
        pending = setTimeout(() => {
          pending = null;
          if (!this.disposed && this.removeCopies(strip, cellId) > 0) {
            stop();
          }
        }, 0);
      }
    };
    const timer = setTimeout(() => stop(), WATCH_MS);
    const stop = (): void => {
      clearTimeout(timer);
      if (pending !== null) {
        clearTimeout(pending);
      }
      for (const area of outputs) {
        area.changed.disconnect(retry);
      }
      this.watches.delete(stop);
    };
    for (const area of outputs) {
      area.changed.connect(retry);
    }
    this.watches.add(stop);
  }

  private get model(): INotebookModel | null {
    const model = this.context.model;
    return model && !model.isDisposed ? model : null;
  }

  private disposed = false;
  private readonly registered = new WeakSet<Kernel.IKernelConnection>();
  private readonly watches = new Set<() => void>();
}

/** Replace each output that carries a copy of `record` with one whose metadata lacks it; how many were replaced. */
export function removeFromOutputs(outputs: IOutputAreaModel, record: JSONObject): number {
  return stripOutputs(outputs, metadata => metadataWithoutRecord(metadata, record));
}

/** Replace each output whose metadata `strip` changes with one holding the changed metadata; how many. */
function stripOutputs(outputs: IOutputAreaModel, strip: Strip): number {
  let removed = 0;
  for (let i = 0; i < outputs.length; i++) {
    const output = outputs.get(i);
    const metadata = strip(output.metadata);
    if (metadata !== null) {
      // Output models are immutable views of the shared model: set a new output in its place.
      outputs.set(i, { ...output.toJSON(), metadata } as Parameters<IOutputAreaModel['set']>[1]);
      removed++;
    }
  }
  return removed;
}

/** The ids of a notebook's cells. */
function* cellIds(model: INotebookModel): Iterable<string> {
  for (const cell of model.cells) {
    yield cell.id;
  }
}

/** Whether comm data is a protocol 1 `record` or `sidecar` message (comm messages do not name their target). */
function isRecordMessage(data: unknown): boolean {
  if (!isObject(data) || !('cell_id' in data)) {
    return false;
  }
  if (data.op === 'sidecar') {
    return sidecarFile(data.sidecar) !== null;
  }
  return data.op === 'record' && isObject(data.record) && data.record.kind === 'step' && recordId(data.record) !== null;
}

function send(comm: Kernel.IComm, data: JSONObject): void {
  if (comm.isDisposed) {
    return;
  }
  try {
    comm.send(data);
  } catch (e) {
    console.warn('agl-notebook: could not answer the kernel', e);
  }
}
