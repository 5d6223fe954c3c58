// The approval form of agl_notebook: a tool call waiting for a person's decision, in one widget.
//
// As in the question form (form.js, which says why), nothing is synced while the person edits: each action is one
// custom message, sent at once whatever the kernel's status: "approve", "always", "deny" with its message, or
// "edit" with the whole edited arguments object. The kernel answers through synced traits: the problems of the last
// edit, each with the path it names (drawn next to that field, in the words the agent would read), the number of
// the edit it checked, and the decision in words once one is made.

let forms = 0;

function element(tag, attributes = {}, text = "") {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  if (text) node.textContent = text;
  return node;
}

function shown(value) {
  return typeof value === "string" ? value : JSON.stringify(value);
}

function emptyValue(node) {
  switch (node.kind) {
    case "text": return "";
    case "boolean": return false;
    case "object": return Object.fromEntries(node.fields.map((f) => [f.name, emptyValue(f)]));
    case "list": return [];
    default: return null;
  }
}

// "a.b[2]" -> "a.b" -> "a" -> "": where an error for a path no field has is drawn instead.
function parentPath(path) {
  const cut = path.replace(/(\.[^.[\]]*|\[\d+\])$/, "");
  return cut === path ? "" : cut;
}

const NUMBER = /^-?\d+(\.\d+)?([eE][+-]?\d+)?$/;

// Each field returns {el, read(path, found), inputs}: `read` gives its value and notes in `found` (path -> where an
// error for that path is drawn) that it is the field of `path`.
function field(node, value, label, ids, depth) {
  if (node.kind === "object") return objectField(node, value, label, ids, depth);
  if (node.kind === "list") return listField(node, value, label, ids, depth);
  if (node.kind === "optional") return optionalField(node, value, label, ids, depth);
  return scalarField(node, value, label, ids);
}

function hintFor(node, id) {
  return element("div", { class: "agl-form-hint agl-approval-description", id: `${id}-hint` }, node.description || "");
}

function scalarField(node, value, label, ids) {
  const id = ids();
  const row = element("div", { class: `agl-form-row agl-approval-${node.kind}` });
  const error = element("div", { class: "agl-form-error", id: `${id}-error`, "aria-live": "polite" });
  let control;
  let inputs;
  let read;
  let labelNode;
  if (node.kind === "boolean") {
    control = element("span", { class: "agl-form-toggle", role: "radiogroup", id, "aria-labelledby": `${id}-label` });
    inputs = [];
    for (const [answer, text] of [[true, "Yes"], [false, "No"]]) {
      const radio = element("input", { type: "radio", id: `${id}-${text.toLowerCase()}`, name: id, value: text });
      radio.checked = value === answer;
      control.append(radio, element("label", { for: radio.id }, text));
      inputs.push(radio);
    }
    read = () => {
      const chosen = inputs.find((r) => r.checked);
      return chosen ? chosen.value === "Yes" : null;
    };
    labelNode = element("span", { class: "agl-form-label", id: `${id}-label` }, label);
    row.append(labelNode);
  } else {
    const text = value === null || value === undefined ? "" : shown(value);
    const long = node.kind === "json" || text.includes("\n") || text.length > 60;
    control = long
      ? element("textarea", { id, rows: String(Math.min(8, Math.max(2, text.split("\n").length))) })
      : element("input", { id, type: "text", autocomplete: "off" });
    if (node.kind === "integer" || node.kind === "number") {
      control.setAttribute("inputmode", node.kind === "integer" ? "numeric" : "decimal");
    }
    control.value = node.kind === "json" ? JSON.stringify(value ?? null, null, 2) : text;
    if (node.kind === "json") control.classList.add("agl-approval-json");
    inputs = [control];
    read = (path, found) => {
      if (node.kind === "text") return control.value;
      if (node.kind === "json") {
        try {
          return JSON.parse(control.value);
        } catch (e) {
          found.local.push({ path, text: `${path || "arguments"}: not valid JSON (${e.message}).` });
          return null;
        }
      }
      // A number as typed; anything else goes as text, and the agent's own check says what is wrong with it.
      const typed = control.value.trim();
      return NUMBER.test(typed) ? Number(typed) : control.value;
    };
    labelNode = element("label", { class: "agl-form-label", for: id }, label);
    row.append(labelNode);
  }
  control.setAttribute("aria-describedby", `${id}-hint ${id}-error`);
  const body = element("div", { class: "agl-form-control" });
  body.append(control);
  row.append(body, hintFor(node, id), error);
  return {
    el: row,
    inputs,
    focus: () => inputs[0].focus(),
    relabel: (text) => {
      labelNode.textContent = text;
    },
    read: (path, found) => {
      found.set(path, { error, mark: row, invalid: "agl-form-invalid", inputs });
      return read(path, found);
    },
  };
}

function objectField(node, value, label, ids, depth) {
  const id = ids();
  const current = value && typeof value === "object" && !Array.isArray(value) ? value : {};
  const children = node.fields.map((f) => ({
    name: f.name,
    made: field(f, f.name in current ? current[f.name] : emptyValue(f), f.name, ids, depth + 1),
  }));
  const error = element("div", { class: "agl-form-error", id: `${id}-error`, "aria-live": "polite" });
  let el;
  const legend = element("legend", {}, label);
  if (depth === 0) {
    el = element("div", { class: "agl-approval-fields" });
  } else {
    el = element("fieldset", { class: "agl-approval-group", id });
    el.append(legend);
    if (node.description) el.append(element("div", { class: "agl-form-hint" }, node.description));
  }
  for (const child of children) el.append(child.made.el);
  el.append(error);
  return {
    el,
    get inputs() {
      return children.flatMap((c) => c.made.inputs); // a list's change as items come and go
    },
    focus: () => children[0]?.made.focus(),
    relabel: (text) => {
      legend.textContent = text;
    },
    read: (path, found) => {
      // The whole arguments object has no field of its own: what is wrong with it goes under the fields.
      if (depth > 0) found.set(path, { error, mark: el, invalid: "agl-approval-invalid", inputs: [] });
      const out = {};
      for (const child of children) {
        out[child.name] = child.made.read(path ? `${path}.${child.name}` : child.name, found);
      }
      return out;
    },
  };
}

function listField(node, value, label, ids, depth) {
  const id = ids();
  const group = element("div", { class: "agl-approval-group", role: "group", id, "aria-labelledby": `${id}-label` });
  const title = element("span", { class: "agl-form-label", id: `${id}-label` }, label);
  group.append(title);
  if (node.description) group.append(element("div", { class: "agl-form-hint" }, node.description));
  const list = element("div", { class: "agl-approval-items" });
  const add = element("button", { type: "button", class: "agl-approval-button agl-approval-small" }, `Add to ${label}`);
  const error = element("div", { class: "agl-form-error", id: `${id}-error`, "aria-live": "polite" });
  group.append(list, add, error);
  const items = [];
  // Items are numbered as they stand: removing the second makes the third the second.
  const relabel = () => {
    items.forEach((item, i) => {
      item.made.relabel(`${title.textContent} ${i + 1}`);
      item.remove.setAttribute("aria-label", `Remove ${title.textContent} ${i + 1}`);
    });
    add.textContent = `Add to ${title.textContent}`;
  };
  const append = (itemValue) => {
    const made = field(node.item, itemValue, `${label} ${items.length + 1}`, ids, depth + 1);
    const row = element("div", { class: "agl-approval-item" });
    const remove = element("button", { type: "button", class: "agl-approval-button agl-approval-small" }, "Remove");
    row.append(made.el, remove);
    list.append(row);
    const item = { made, row, remove };
    items.push(item);
    remove.addEventListener("click", () => {
      items.splice(items.indexOf(item), 1);
      row.remove();
      relabel();
      add.focus();
    });
    relabel();
    return made;
  };
  for (const itemValue of Array.isArray(value) ? value : []) append(itemValue);
  add.addEventListener("click", () => append(emptyValue(node.item)).focus());
  return {
    el: group,
    get inputs() {
      return [...items.flatMap((i) => [...i.made.inputs, i.remove]), add];
    },
    focus: () => (items[0] ? items[0].made.focus() : add.focus()),
    relabel: (text) => {
      title.textContent = text;
      relabel();
    },
    read: (path, found) => {
      found.set(path, { error, mark: group, invalid: "agl-approval-invalid", inputs: [] });
      return items.map((item, i) => item.made.read(`${path}[${i}]`, found));
    },
  };
}

function optionalField(node, value, label, ids, depth) {
  const inner = node.inner;
  const empty = value === null || value === undefined;
  const made = field(inner, empty ? emptyValue(inner) : value, label, ids, depth);
  const id = ids();
  const none = element("input", { type: "checkbox", id, "aria-label": `${label}: None` });
  none.checked = empty;
  const toggle = element("div", { class: "agl-approval-none" });
  toggle.append(none, element("label", { for: id }, "None"));
  const wrap = element("div", { class: "agl-approval-optional" });
  wrap.append(made.el, toggle);
  const sync = () => {
    for (const input of made.inputs) input.disabled = none.checked;
  };
  none.addEventListener("change", sync);
  sync();
  return {
    el: wrap,
    get inputs() {
      return [...made.inputs, none];
    },
    focus: () => (none.checked ? none.focus() : made.focus()),
    relabel: (text) => {
      made.relabel(text);
      none.setAttribute("aria-label", `${text}: None`);
    },
    read: (path, found) => {
      const got = made.read(path, found);
      return none.checked ? null : got;
    },
  };
}

function render({ model, el }) {
  forms += 1;
  const prefix = `agl-approval-${forms}-${Math.random().toString(36).slice(2, 8)}`;
  let count = 0;
  const ids = () => `${prefix}-${(count += 1)}`;
  const tool = model.get("tool");
  const args = model.get("arguments") ?? {};

  const root = element("div", { class: "agl-form agl-approval" });
  const head = element("div", { class: "agl-form-title" });
  head.append("Approve the call to ", element("code", {}, tool), "?");
  const summary = element("table", { class: "agl-approval-args" });
  for (const [name, value] of Object.entries(args)) {
    const row = element("tr");
    row.append(element("th", { scope: "row" }, name), element("td", {}, shown(value)));
    summary.append(row);
  }

  const editId = `${prefix}-edit`;
  const denyId = `${prefix}-deny`;
  const actions = element("div", { class: "agl-form-actions agl-approval-actions", role: "group" });
  actions.setAttribute("aria-label", `Decide on the call to ${tool}`);
  const approve = element("button", { type: "button", class: "agl-form-submit" }, "Approve");
  const edit = element("button", {
    type: "button", class: "agl-approval-button", "aria-expanded": "false", "aria-controls": editId,
  }, "Edit\u2026");
  const deny = element("button", {
    type: "button", class: "agl-approval-button", "aria-expanded": "false", "aria-controls": denyId,
  }, "Deny\u2026");
  const always = element("button", { type: "button", class: "agl-approval-button" }, "Always approve this tool");
  always.setAttribute("title", `Approve this call, and every later call of ${tool} in this Run without asking`);
  const status = element("span", { class: "agl-form-status", "aria-live": "polite" });
  actions.append(approve, edit, deny, always, status);

  // Edit: the payload's fields, checked in the kernel with the agent's own validation.
  const editForm = element("form", { class: "agl-approval-panel", id: editId, novalidate: "" });
  editForm.hidden = true;
  editForm.setAttribute("aria-label", `Edit the arguments of ${tool}`);
  const fields = field(model.get("fields"), args, tool, ids, 0);
  const message = element("div", { class: "agl-form-error agl-form-message", "aria-live": "polite" });
  const run = element("button", { type: "submit", class: "agl-form-submit" }, "Run with these arguments");
  const cancelEdit = element("button", { type: "button", class: "agl-approval-button" }, "Cancel");
  const checking = element("span", { class: "agl-form-status", "aria-live": "polite" });
  const editActions = element("div", { class: "agl-form-actions" });
  editActions.append(run, cancelEdit, checking);
  editForm.append(fields.el, message, editActions);

  // Deny: an optional message, which the agent receives as the tool's error result.
  const denyForm = element("form", { class: "agl-approval-panel", id: denyId, novalidate: "" });
  denyForm.hidden = true;
  const reasonId = `${prefix}-reason`;
  const reasonRow = element("div", { class: "agl-form-row" });
  const reason = element("input", { id: reasonId, type: "text", autocomplete: "off", placeholder: "optional" });
  const reasonBody = element("div", { class: "agl-form-control" });
  reasonBody.append(reason);
  reasonRow.append(element("label", { class: "agl-form-label", for: reasonId }, "Message to the agent"), reasonBody);
  const confirmDeny = element("button", { type: "submit", class: "agl-form-submit agl-approval-deny" }, "Deny the call");
  const cancelDeny = element("button", { type: "button", class: "agl-approval-button" }, "Cancel");
  const denyActions = element("div", { class: "agl-form-actions" });
  denyActions.append(confirmDeny, cancelDeny);
  denyForm.append(reasonRow, denyActions);

  root.append(head, summary, actions, editForm, denyForm);
  el.append(root);

  const open = (panel, button, other, otherButton) => {
    other.hidden = true;
    otherButton.setAttribute("aria-expanded", "false");
    panel.hidden = false;
    button.setAttribute("aria-expanded", "true");
  };
  const close = (panel, button) => {
    panel.hidden = true;
    button.setAttribute("aria-expanded", "false");
    button.focus();
  };

  let attempt = 0;
  let found = new Map();
  const send = (content) => {
    if (model.get("decided")) return;
    status.textContent = "Sending\u2026";
    model.send(content);
  };
  const sendEdit = () => {
    const reading = new Map();
    reading.local = [];
    const edited = fields.read("", reading);
    found = reading;
    if (reading.local.length) {
      place(reading.local);
      checking.textContent = "Please correct the arguments above.";
      return;
    }
    if (model.get("decided")) return;
    attempt += 1;
    checking.textContent = "Checking\u2026";
    model.send({ kind: "edit", attempt, arguments: edited });
  };

  // Each problem goes next to the deepest field its path names; one naming no field goes under the fields.
  const place = (problems) => {
    for (const handle of found.values()) {
      handle.error.textContent = "";
      handle.mark.classList.remove(handle.invalid);
      for (const input of handle.inputs) input.removeAttribute("aria-invalid");
    }
    const general = [];
    for (const { path, text } of problems) {
      // The validator names the whole arguments object "arguments" (unless a field has that name).
      let key = path === "arguments" && !found.has("arguments") ? "" : path;
      while (key && !found.has(key)) key = parentPath(key);
      const handle = key ? found.get(key) : undefined;
      if (!handle) {
        general.push(text);
        continue;
      }
      handle.error.textContent = handle.error.textContent ? `${handle.error.textContent} ${text}` : text;
      handle.mark.classList.add(handle.invalid);
      for (const input of handle.inputs) input.setAttribute("aria-invalid", "true");
    }
    message.textContent = [model.get("message") || "", ...general].filter((t) => t).join(" ");
  };

  approve.addEventListener("click", () => send({ kind: "approve" }));
  always.addEventListener("click", () => send({ kind: "always" }));
  edit.addEventListener("click", () => {
    open(editForm, edit, denyForm, deny);
    fields.focus();
  });
  deny.addEventListener("click", () => {
    open(denyForm, deny, editForm, edit);
    reason.focus();
  });
  cancelEdit.addEventListener("click", () => close(editForm, edit));
  cancelDeny.addEventListener("click", () => close(denyForm, deny));
  // Enter in a one-line field submits its panel natively; a text area keeps Enter for new lines.
  const onEdit = (event) => {
    event.preventDefault();
    sendEdit();
  };
  const onDeny = (event) => {
    event.preventDefault();
    send({ kind: "deny", message: reason.value });
  };
  editForm.addEventListener("submit", onEdit);
  denyForm.addEventListener("submit", onDeny);
  // Keys pressed in the form are the person's, not notebook shortcuts (Enter on a button would edit the cell);
  // shortcuts with Ctrl, Alt or Meta (Ctrl+S to save) and Escape still reach the notebook.
  const onKeydown = (event) => {
    if (!event.ctrlKey && !event.altKey && !event.metaKey && event.key !== "Escape") event.stopPropagation();
    if (event.key === "Enter" && event.target.type === "radio") {
      event.preventDefault();
      sendEdit();
    }
  };
  root.addEventListener("keydown", onKeydown);

  const show = () => {
    const decided = model.get("decided");
    if (decided) {
      status.textContent = `${decided[0].toUpperCase()}${decided.slice(1)}.`;
      checking.textContent = "";
      for (const control of root.querySelectorAll("button, input, textarea, select")) control.disabled = true;
      return;
    }
    if (model.get("checked") >= attempt && attempt > 0) {
      const problems = model.get("errors") ?? [];
      place(problems);
      checking.textContent = problems.length || model.get("message") ? "Please correct the arguments above." : "";
    } else if (model.get("message")) {
      message.textContent = model.get("message");
      status.textContent = "";
    }
  };
  model.on("change:errors", show);
  model.on("change:message", show);
  model.on("change:checked", show);
  model.on("change:decided", show);
  show();

  return () => {
    root.removeEventListener("keydown", onKeydown);
    editForm.removeEventListener("submit", onEdit);
    denyForm.removeEventListener("submit", onDeny);
    root.remove();
  };
}

export default { render };
