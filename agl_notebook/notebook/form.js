// The question form of agl_notebook: one widget for a whole screen.
//
// Nothing is synced while the person edits: a busy kernel (a cell awaiting the answer) never publishes the "idle"
// status that the widget framework waits for before it sends a model's next change, so field-by-field syncing lost
// every edit after the first. At Submit the form reads every field as it is on the screen and sends all of them in
// one custom message, which the framework sends at once. The kernel answers through synced traits: one error per
// field, a message about the whole answer, the number of the submission it checked, and whether it was accepted.

let forms = 0;

function element(tag, attributes = {}, text = "") {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  if (text) node.textContent = text;
  return node;
}

function textField(spec, id, multiline) {
  const input = multiline
    ? element("textarea", { id, rows: "3" })
    : element("input", { id, type: "text", autocomplete: "off" });
  if (spec.kind === "number") input.setAttribute("inputmode", spec.integer ? "numeric" : "decimal");
  if (spec.placeholder) input.setAttribute("placeholder", spec.placeholder);
  input.value = spec.value ?? "";
  return { control: input, read: () => input.value, inputs: [input] };
}

function choiceField(spec, id) {
  const select = element("select", { id });
  // No option is chosen for the person: a default would be recorded as their answer though they never chose it.
  const prompt = element("option", { value: "" }, spec.placeholder || "Choose one\u2026");
  prompt.disabled = true;
  select.append(prompt);
  for (const option of spec.options) select.append(element("option", { value: option }, option));
  select.value = "";
  prompt.selected = true;
  return { control: select, read: () => (select.value === "" ? null : select.value), inputs: [select] };
}

function confirmField(id) {
  const group = element("span", { class: "agl-form-toggle", role: "radiogroup", id });
  const inputs = [];
  for (const [answer, text] of [[true, "Yes"], [false, "No"]]) {
    const radioId = `${id}-${text.toLowerCase()}`;
    const radio = element("input", { type: "radio", id: radioId, name: id, value: text });
    radio.dataset.answer = String(answer);
    const label = element("label", { for: radioId }, text);
    group.append(radio, label);
    inputs.push(radio);
  }
  const read = () => {
    const chosen = inputs.find((r) => r.checked);
    return chosen ? chosen.dataset.answer === "true" : null;
  };
  return { control: group, read, inputs };
}

function render({ model, el }) {
  forms += 1;
  const prefix = `agl-form-${forms}-${Math.random().toString(36).slice(2, 8)}`;
  const form = element("form", { class: "agl-form", novalidate: "" });
  const title = model.get("title");
  if (title) form.append(element("div", { class: "agl-form-title" }, title));

  // An "actions" field is not drawn as a row: its options are the form's buttons (Accept, Decline, Cancel), and
  // its value is the button pressed; the first one is what Enter presses.
  let pressed = null;
  const fields = model.get("fields").map((spec, i) => {
    const id = `${prefix}-${i}`;
    if (spec.kind === "actions") return { actions: spec.options, read: () => pressed, inputs: [], row: null, error: null };
    const row = element("div", { class: `agl-form-row agl-form-${spec.kind}` });
    const made = spec.kind === "choice" ? choiceField(spec, id)
      : spec.kind === "confirm" ? confirmField(id)
      : textField(spec, id, spec.kind === "textarea");
    // A confirm's label names its group; the Yes and No radios carry labels of their own.
    const label = spec.kind === "confirm"
      ? element("span", { class: "agl-form-label", id: `${id}-label` }, spec.label)
      : element("label", { class: "agl-form-label", for: id }, spec.label);
    if (spec.kind === "confirm") made.control.setAttribute("aria-labelledby", `${id}-label`);
    const hint = element("span", { class: "agl-form-hint", id: `${id}-hint` }, spec.hint || "");
    const error = element("div", { class: "agl-form-error", id: `${id}-error`, "aria-live": "polite" });
    made.control.setAttribute("aria-describedby", `${id}-hint ${id}-error`);
    const body = element("div", { class: "agl-form-control" });
    body.append(made.control, hint);
    row.append(label, body, error);
    form.append(row);
    return { ...made, row, error };
  });

  const message = element("div", { class: "agl-form-error agl-form-message", "aria-live": "polite" });
  const named = fields.find((f) => f.actions);
  const buttons = (named ? named.actions : ["Submit"]).map((text, i) => {
    const button = element("button", { type: "submit", class: i === 0 ? "agl-form-submit" : "agl-form-submit agl-form-other" }, text);
    button.dataset.action = text;
    return button;
  });
  const status = element("span", { class: "agl-form-status", "aria-live": "polite" });
  const actions = element("div", { class: "agl-form-actions" });
  actions.append(...buttons, status);
  form.append(message, actions);
  el.append(form);

  let attempt = 0;
  const send = () => {
    if (model.get("accepted")) return;
    attempt += 1;
    status.textContent = "Checking\u2026";
    model.send({ kind: "submit", attempt, values: fields.map((f) => f.read()) });
  };
  // Enter in a single-line input submits the form natively; a textarea keeps Enter for new lines.
  const onSubmit = (event) => {
    event.preventDefault();
    pressed = event.submitter?.dataset.action ?? buttons[0].dataset.action;
    send();
  };
  // Keys typed into the form are the person's answer, not notebook shortcuts (a, b, d d, arrows, Shift+Enter);
  // shortcuts with Ctrl, Alt or Meta (Ctrl+S to save) and Escape still reach the notebook.
  const onKeydown = (event) => {
    if (!event.ctrlKey && !event.altKey && !event.metaKey && event.key !== "Escape") event.stopPropagation();
    if (event.key === "Enter" && event.target.type === "radio") {
      event.preventDefault();
      pressed = buttons[0].dataset.action;
      send();
    }
  };
  form.addEventListener("submit", onSubmit);
  form.addEventListener("keydown", onKeydown);

  const show = () => {
    const errors = model.get("errors") ?? [];
    fields.forEach((field, i) => {
      if (!field.row) return;
      const text = errors[i] || "";
      field.error.textContent = text;
      field.row.classList.toggle("agl-form-invalid", !!text);
      for (const input of field.inputs) {
        if (text) input.setAttribute("aria-invalid", "true");
        else input.removeAttribute("aria-invalid");
      }
    });
    message.textContent = model.get("message") || "";
    const accepted = !!model.get("accepted");
    if (accepted) {
      status.textContent = pressed && named ? `${pressed}: sent.` : "Submitted.";
      for (const field of fields) for (const input of field.inputs) input.disabled = true;
      for (const button of buttons) button.disabled = true;
    } else if (model.get("checked") >= attempt) {
      const wrong = errors.filter((e) => e).length + (model.get("message") ? 1 : 0);
      status.textContent = attempt === 0 ? "" : wrong ? "Please correct the answer above." : "";
    }
  };
  model.on("change:errors", show);
  model.on("change:message", show);
  model.on("change:checked", show);
  model.on("change:accepted", show);
  show();

  return () => {
    form.removeEventListener("submit", onSubmit);
    form.removeEventListener("keydown", onKeydown);
    form.remove();
  };
}

export default { render };
