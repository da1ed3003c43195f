// maljan console: the few live parts of the pages. No framework, no build step; loaded from
// /assets/app.js (the CSP allows no inline script). Every value shown comes in as text.
"use strict";

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

// A server form: Test results hold for the values tested. Changing a connection field hides them.
function watchServerForm() {
  const form = document.getElementById("server-form");
  if (!form) return;
  const result = document.getElementById("test-result");
  const note = document.getElementById("stale-note");
  const showTransport = () => {
    const t = form.querySelector("#transport").value;
    form.querySelectorAll(".stdio-only").forEach((f) => (f.hidden = t !== "stdio"));
    form.querySelectorAll(".http-only").forEach((f) => (f.hidden = t === "stdio"));
  };
  showTransport();
  form.querySelectorAll("[data-conn]").forEach((input) => {
    input.addEventListener("input", () => {
      if (input.id === "transport") showTransport();
      if (result && result.querySelector(".test")) {
        result.classList.add("stale");
        result.querySelectorAll("input").forEach((i) => (i.disabled = true));
        if (note) note.hidden = false;
      }
    });
  });
  form.querySelectorAll("[data-confirm]").forEach((b) =>
    b.addEventListener("click", (ev) => {
      if (!window.confirm(b.dataset.confirm)) ev.preventDefault();
    })
  );
}

// A running job: its events as they happen, then the report (the page reloads when it is done).
function watchJob() {
  const live = document.getElementById("live");
  if (!live || !window.EventSource) return;
  const steps = document.getElementById("live-steps");
  const stage = document.getElementById("live-stage");
  const rows = new Map();
  const src = new EventSource(live.dataset.events);
  const on = (kind, f) => src.addEventListener(kind, (m) => f(JSON.parse(m.data)));
  on("stage", (d) => (stage.textContent = "stage: " + d.stage));
  on("connecting", (d) => (stage.textContent = "connecting to " + d.servers.join(", ")));
  on("connected", (d) => {
    const li = el("li", "server" + (d.error ? " bad" : ""), d.server + (d.error ? ": " + d.error : " connected (" + d.tools + " tools, " + d.tools_unavailable + " unavailable)"));
    steps.appendChild(li);
  });
  on("step_started", (d) => {
    const li = el("li", "running");
    li.appendChild(el("span", "title", d.index + "/" + d.total + " " + d.title));
    li.appendChild(el("span", "state", "running…"));
    rows.set(d.index, li);
    steps.appendChild(li);
  });
  on("call_finished", (d) => {
    // A triage step has its row from step_started; a call the model made arrives whole.
    let li = rows.get(d.index);
    if (!li) {
      li = steps.appendChild(el("li"));
      li.appendChild(el("span", "title", d.stage + ": " + d.server + "." + d.tool));
    }
    li.className = "done st-" + d.status.replace(" ", "-");
    const state = li.querySelector(".state") || li.appendChild(el("span", "state"));
    state.textContent = d.status + (d.error ? " (" + d.error + ")" : "") + (d.server ? " on " + d.server : "");
    for (const ev of d.evidence) {
      const a = el("a", "ev", ev);
      a.href = "/jobs/" + live.dataset.events.split("/")[4] + "/ledger?ev=" + encodeURIComponent(ev) + "#" + encodeURIComponent(ev);
      li.appendChild(document.createTextNode(" "));
      li.appendChild(a);
    }
  });
  on("upload", (d) => (stage.textContent = "uploading to " + d.server + ": " + Math.round((100 * d.sent) / Math.max(d.total, 1)) + "%"));
  on("model_answered", (d) => (stage.textContent = d.stage + ": the model answered (" + d.tool_calls + " tool calls)"));
  on("done", (d) => {
    stage.textContent = "done: " + d.status + (d.verdict ? ", " + d.verdict.verdict : "");
    src.close();
    setTimeout(() => window.location.reload(), 300);
  });
}

document.addEventListener("DOMContentLoaded", () => {
  watchServerForm();
  watchJob();
});
