/**
 * Provenance badges: a small element drawn beside each output whose metadata holds agl_notebook's provenance
 * ("replayed · recorded on 2026-12-01 · no model call", "live · 1 model request"). The badge is added to the output
 * area's DOM only; the output's data and metadata are never changed. Badges are drawn again whenever a code cell's
 * outputs change (a step's display updated in place, outputs cleared) and when cells are added (a notebook loaded).
 * The same pass gives each "fork this step" snippet of a finished view its "Fork here" button (forks.ts).
 */

import type { CodeCell } from '@jupyterlab/cells';
import type { NotebookPanel } from '@jupyterlab/notebook';
import type { IOutputAreaModel } from '@jupyterlab/outputarea';

import { drawForkButtons } from './forks.js';
import { type Badge, badgeFor, PROVENANCE_KEY } from './outputs.js';

/** The class of every badge element. */
export const BADGE_CLASS = 'agl-provenance';

/** Badge styles. Theme variables only, so a badge reads in light and dark themes alike. */
export const BADGE_CSS = `
.jp-OutputArea-child > .${BADGE_CLASS} {
  flex: 0 0 auto;
  align-self: flex-start;
  max-width: 40%;
  margin: 4px 8px 0 8px;
  padding: 0 8px;
  border: 1px solid var(--jp-border-color1);
  border-radius: 9px;
  background: var(--jp-layout-color2);
  color: var(--jp-ui-font-color1);
  font-family: var(--jp-ui-font-family);
  font-size: var(--jp-ui-font-size0);
  line-height: 18px;
  cursor: default;
}
.${BADGE_CLASS}::before {
  content: '';
  display: inline-block;
  width: 7px;
  height: 7px;
  margin-right: 6px;
  border-radius: 50%;
  vertical-align: 1px;
}
.${BADGE_CLASS}.${BADGE_CLASS}-replayed { border-color: var(--jp-success-color1); }
.${BADGE_CLASS}.${BADGE_CLASS}-replayed::before { background: var(--jp-success-color1); }
.${BADGE_CLASS}.${BADGE_CLASS}-live { border-color: var(--jp-warn-color1); }
.${BADGE_CLASS}.${BADGE_CLASS}-live::before { background: var(--jp-warn-color1); }
`;

/** Add the badge styles to the page (once). */
export function addBadgeStyles(document: Document): void {
  const id = 'agl-notebook-badge-styles';
  if (!document.getElementById(id)) {
    const style = document.createElement('style');
    style.id = id;
    style.textContent = BADGE_CSS;
    document.head.appendChild(style);
  }
}

/** Draws the badges of one notebook panel for as long as it lives. */
export class PanelBadges {
  constructor(private readonly panel: NotebookPanel) {
    this.schedule = this.schedule.bind(this);
    const notebook = panel.content;
    notebook.modelChanged.connect(() => this.watchCells(), this);
    this.watchCells();
    void panel.context.ready.then(this.schedule);
    panel.disposed.connect(() => {
      this.disposed = true;
      if (this.pending !== null) {
        clearTimeout(this.pending);
      }
    });
  }

  /** Draw every badge again soon (after the output area has handled the change that asked for it). */
  schedule(): void {
    if (this.pending === null && !this.disposed) {
      this.pending = setTimeout(() => {
        this.pending = null;
        if (!this.disposed) {
          this.drawAll();
        }
      }, 0);
    }
  }

  private watchCells(): void {
    const model = this.panel.content.model;
    if (model && !this.watchedModels.has(model)) {
      this.watchedModels.add(model);
      model.cells.changed.connect(this.schedule, this);
    }
    this.schedule();
  }

  private drawAll(): void {
    for (const cell of this.panel.content.widgets) {
      if (cell.model.type !== 'code' || cell.isDisposed) {
        continue;
      }
      if (!this.watchedCells.has(cell)) {
        // A cell drawn lazily (windowing) builds its output area when it is first shown: draw again then.
        this.watchedCells.add(cell);
        void cell.ready.then(this.schedule);
      }
      const outputs = (cell as CodeCell).outputArea;
      if (!outputs || outputs.isDisposed) {
        continue;
      }
      if (!this.watchedOutputs.has(outputs.model)) {
        this.watchedOutputs.add(outputs.model);
        outputs.model.changed.connect(this.schedule, this);
      }
      const children = outputs.widgets;
      const count = Math.min(outputs.model.length, children.length);
      for (let i = 0; i < children.length; i++) {
        const child = children[i];
        const badge = i < count && child.hasClass('jp-OutputArea-child') ?
          badgeFor(outputs.model.get(i).metadata[PROVENANCE_KEY]) : null;
        drawBadge(child.node, badge);
        drawForkButtons(child.node, code => this.insertBelow(cell, code));
      }
    }
  }

  /** Insert a code cell holding `code` right below `cell` (never run). */
  private insertBelow(cell: object, code: string): void {
    const notebook = this.panel.content;
    const index = notebook.widgets.indexOf(cell as (typeof notebook.widgets)[number]);
    const model = notebook.model;
    if (index < 0 || model === null) {
      return;
    }
    model.sharedModel.insertCell(index + 1, { cell_type: 'code', source: code });
    notebook.activeCellIndex = index + 1;
  }

  private disposed = false;
  private pending: ReturnType<typeof setTimeout> | null = null;
  private readonly watchedModels = new WeakSet<object>();
  private readonly watchedCells = new WeakSet<object>();
  private readonly watchedOutputs = new WeakSet<IOutputAreaModel>();
}

/** Put `badge` (or no badge) as the last element of an output's row, touching the DOM only when it changes. */
export function drawBadge(row: HTMLElement, badge: Badge | null): void {
  const existing = Array.from(row.children).filter(e => e.classList.contains(BADGE_CLASS)) as HTMLElement[];
  if (badge === null) {
    existing.forEach(e => e.remove());
    return;
  }
  const [element, ...extra] = existing;
  extra.forEach(e => e.remove());
  const target = element ?? row.ownerDocument.createElement('div');
  const className = `${BADGE_CLASS} ${BADGE_CLASS}-${badge.kind}`;
  if (target.className !== className) {
    target.className = className;
  }
  if (target.textContent !== badge.text) {
    target.textContent = badge.text; // text, never HTML
  }
  if (target.title !== badge.title) {
    target.title = badge.title;
  }
  target.dataset.aglSource = badge.kind;
  if (target.parentElement !== row || row.lastElementChild !== target) {
    row.appendChild(target); // last: after the prompt and the output
  }
}
