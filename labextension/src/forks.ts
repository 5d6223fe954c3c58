/**
 * "Fork here" buttons: a finished step's view ends with the code that forks its record at each turn (a `pre` of class
 * `agl-fork-code`, drawn by agl_notebook/notebook/render.py; docs/forking.md). Beside each, a button inserts a new code
 * cell below the step's cell holding that code. It never runs it: the person reads it, changes the role, and runs it.
 * Only the DOM of the output is touched (a button added); the output's data and metadata are never changed.
 */

/** The class of the `pre` holding the code that forks a step at a turn. */
export const FORK_CODE_CLASS = 'agl-fork-code';

/** The class of every "Fork here" button. */
export const FORK_BUTTON_CLASS = 'agl-fork-button';

/**
 * The one line agl_notebook draws (`fork_code` in render.py): a variable name, a record id, a turn. Any other text in
 * a `pre` of the snippet's class (an output of a notebook someone shared) gets no button, so a click never inserts
 * code agl_notebook did not write.
 */
const FORK_SNIPPET = /^await run\.step\([\p{L}_][\p{L}\p{N}_]*, fork_from="[0-9a-f]{32}", at_turn=[0-9]{1,9}\)$/u;

/** Whether `code` is a fork snippet as agl_notebook draws it. */
export function isForkSnippet(code: string): boolean {
  return FORK_SNIPPET.test(code);
}

/** What a button does with its code: insert it in a new cell below the step's cell. */
export type InsertCode = (code: string) => void;

/**
 * Give every fork snippet in `row` (an output's row) its button, once; a click inserts the snippet's text as it is
 * shown (text, never HTML) through `insert`. A `pre` whose text is not a snippet (`isForkSnippet`) gets none.
 */
export function drawForkButtons(row: HTMLElement, insert: InsertCode): number {
  let added = 0;
  for (const pre of Array.from(row.querySelectorAll(`pre.${FORK_CODE_CLASS}`)) as HTMLElement[]) {
    const next = pre.nextElementSibling;
    if ((next !== null && next.classList.contains(FORK_BUTTON_CLASS)) || !isForkSnippet(pre.textContent ?? '')) {
      continue;
    }
    const button = row.ownerDocument.createElement('button');
    button.className = `${FORK_BUTTON_CLASS} jp-mod-styled`;
    button.type = 'button';
    button.textContent = 'Fork here';
    button.title = 'Insert a new cell below with this code (it is not run)';
    button.addEventListener('click', event => {
      event.preventDefault();
      event.stopPropagation();
      insert(pre.textContent ?? '');
    });
    pre.insertAdjacentElement('afterend', button);
    added++;
  }
  return added;
}
