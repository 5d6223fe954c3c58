/**
 * agl-notebook: the JupyterLab 4 / Notebook 7 side of agl_notebook (docs/recordings.md, "Where recordings live").
 *
 * For every notebook:
 * - registers the comm target `agl_notebook` on its kernel (again after each kernel change; a restart keeps the
 *   registration) and keeps the records the kernel sends in the notebook's metadata (link.ts);
 * - saves a live display (a running step's widget, a waiting question) as its static placeholder, never as a widget
 *   that is dead once the kernel is gone (outputs.ts, `notebookForSaving`); the page's live widget is untouched;
 * - draws each finished step's provenance (live or replayed) as a badge on its output (badges.ts).
 */

import type { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { INotebookTracker, type INotebookModel, type NotebookPanel } from '@jupyterlab/notebook';

import { addBadgeStyles, PanelBadges } from './badges.js';
import { NotebookLink, PROTOCOL, TARGET } from './link.js';
import { notebookForSaving } from './outputs.js';

/**
 * Make the model's JSON (what the document context saves, autosave included) hold live displays as placeholders.
 *
 * The JSON is changed, not the model: stripping the widget view from the model would re-draw the live widget (a
 * flicker, and an answer typed but not yet submitted would be lost) and then need restoring after the save.
 */
export function saveLiveOutputsAsPlaceholders(model: INotebookModel): void {
  const toJSON = model.toJSON.bind(model);
  model.toJSON = () => notebookForSaving(toJSON());
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'agl-notebook:plugin',
  description: 'Keeps agl_notebook step recordings in the notebook metadata (comm target agl_notebook), saves live ' +
    'steps as static text, and shows whether a step ran live or was replayed.',
  autoStart: true,
  requires: [INotebookTracker],
  activate: (_app: JupyterFrontEnd, tracker: INotebookTracker): void => {
    addBadgeStyles(document);
    // Several views of one notebook share one context (one model, one session): link each context once.
    const linked = new WeakSet<NotebookPanel['context']>();
    const attach = (panel: NotebookPanel): void => {
      if (!linked.has(panel.context)) {
        linked.add(panel.context);
        new NotebookLink(panel.context);
        saveLiveOutputsAsPlaceholders(panel.context.model);
      }
      new PanelBadges(panel);
    };
    tracker.forEach(attach);
    tracker.widgetAdded.connect((_, panel) => attach(panel));
    console.log(`agl-notebook: activated (comm target ${TARGET}, protocol ${PROTOCOL})`);
  }
};

export default plugin;
