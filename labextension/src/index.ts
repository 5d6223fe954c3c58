/**
 * agl-notebook: the JupyterLab 4 / Notebook 7 side of agl_notebook (layer 8, "Where recordings live").
 *
 * Registers the comm target `agl_notebook` on the kernel of every notebook (again after each kernel change; a
 * restart keeps the registration) and keeps the records the kernel sends in the notebook's metadata. See link.ts.
 */

import type { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { INotebookTracker, type NotebookPanel } from '@jupyterlab/notebook';

import { NotebookLink, PROTOCOL, TARGET } from './link.js';

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'agl-notebook:plugin',
  description: 'Keeps agl_notebook step recordings in the notebook metadata (comm target agl_notebook).',
  autoStart: true,
  requires: [INotebookTracker],
  activate: (_app: JupyterFrontEnd, tracker: INotebookTracker): void => {
    // Several views of one notebook share one context (one model, one session): link each context once.
    const linked = new WeakSet<NotebookPanel['context']>();
    const attach = (panel: NotebookPanel): void => {
      if (!linked.has(panel.context)) {
        linked.add(panel.context);
        new NotebookLink(panel.context);
      }
    };
    tracker.forEach(attach);
    tracker.widgetAdded.connect((_, panel) => attach(panel));
    console.log(`agl-notebook: activated (comm target ${TARGET}, protocol ${PROTOCOL})`);
  }
};

export default plugin;
