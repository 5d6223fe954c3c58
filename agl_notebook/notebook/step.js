// The live view of a step: the kernel draws the trace as HTML (one synced string, redrawn at most twenty times a
// second). A redraw replaces the HTML, which would close every block the person opened (a tool call, the model's
// thinking as it streams) and scroll each long block back to its top; so each block the kernel keys with
// data-agl-keep is given back, in the new drawing, the open state and scroll position the person left it with.

function render({ model, el }) {
  const body = document.createElement("div");
  body.className = "agl-step-live";
  el.append(body);

  const show = () => {
    const kept = new Map();
    for (const node of body.querySelectorAll("[data-agl-keep]")) {
      const inner = node.querySelector("div");
      kept.set(node.dataset.aglKeep, { open: node.open, scroll: inner ? inner.scrollTop : 0 });
    }
    body.innerHTML = model.get("value");
    for (const node of body.querySelectorAll("[data-agl-keep]")) {
      const was = kept.get(node.dataset.aglKeep);
      if (was === undefined) continue;
      node.open = was.open;
      const inner = node.querySelector("div");
      if (inner && was.scroll) inner.scrollTop = was.scroll;
    }
  };
  model.on("change:value", show);
  show();
  return () => model.off("change:value", show);
}

export default { render };
