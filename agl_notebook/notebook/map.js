// The live view of a run.map: the kernel draws the progress and the table as HTML (one synced string, redrawn at
// most twice a second); this adds a Stop button and opens an item's step when its row is clicked. Both are custom
// messages, which the widget framework sends at once even while the cell keeps the kernel busy. Against a previous
// run, "Only changed items" hides the rows the kernel did not mark changed: the choice lives here, in the browser,
// so it costs no message, survives every redraw and never reaches the saved notebook.

function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "agl-map-live";
  const bar = document.createElement("div");
  bar.className = "agl-map-actions";
  const stop = document.createElement("button");
  stop.type = "button";
  stop.className = "agl-map-stop";
  stop.textContent = "Stop";
  stop.title = "Start no more items; the running ones finish and every finished one is kept.";
  const changedOnly = document.createElement("label");
  changedOnly.className = "agl-map-changed-only";
  changedOnly.title = "Show only the items that improved, regressed, changed, newly fail or newly pass.";
  const changedBox = document.createElement("input");
  changedBox.type = "checkbox";
  changedOnly.append(changedBox, " Only changed items");
  bar.append(stop, changedOnly);
  const body = document.createElement("div");
  const noneChanged = document.createElement("div");
  noneChanged.className = "agl-map-none-changed";
  noneChanged.textContent = "No item has changed yet.";
  const detail = document.createElement("div");
  detail.className = "agl-map-detail";
  root.append(bar, body, noneChanged, detail);
  el.append(root);

  const show = () => {
    // A redraw replaces the table: the focused row keeps its focus in the new one.
    const focused = body.contains(document.activeElement) ? document.activeElement.dataset?.item : undefined;
    body.innerHTML = model.get("html");
    if (focused !== undefined) body.querySelector(`[data-item="${focused}"]`)?.focus();
    const stopping = !!model.get("stopping");
    stop.disabled = stopping || !!model.get("ended");
    stop.textContent = stopping ? "Stopping\u2026" : "Stop";
    filter();
  };
  const filter = () => {
    const paired = !!model.get("paired");
    changedOnly.hidden = !paired;
    const only = paired && changedBox.checked;
    root.classList.toggle("agl-map-only-changed", only);
    noneChanged.hidden = !only || !!body.querySelector("[data-changed]");
  };
  changedBox.addEventListener("change", filter);
  const showDetail = () => {
    const html = model.get("detail");
    detail.innerHTML = html ? `<div><button type="button" class="agl-map-close">Close</button></div>${html}` : "";
  };
  stop.addEventListener("click", () => model.send({ kind: "stop" }));
  const open = (event) => {
    const row = event.target.closest("[data-item]");
    if (row) model.send({ kind: "open", index: Number(row.dataset.item) });
  };
  body.addEventListener("click", open);
  // A row is focusable (Tab): Enter opens it, and the key is the view's, not a notebook shortcut.
  body.addEventListener("keydown", (event) => {
    if (event.key !== "Enter" || !event.target.closest("[data-item]")) return;
    event.preventDefault();
    event.stopPropagation();
    open(event);
  });
  detail.addEventListener("click", (event) => {
    if (event.target.closest(".agl-map-close")) model.send({ kind: "close" });
  });
  model.on("change:html", show);
  model.on("change:stopping", show);
  model.on("change:ended", show);
  model.on("change:paired", filter);
  model.on("change:detail", showDetail);
  show();
  showDetail();
  return () => {
    model.off("change:html", show);
    model.off("change:stopping", show);
    model.off("change:ended", show);
    model.off("change:paired", filter);
    model.off("change:detail", showDetail);
  };
}

export default { render };
