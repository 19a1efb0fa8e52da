// The Plugins page: memory providers of a profile from `api/plugins`, Install (or the reason
// installs are blocked) and Activate per row; after an action its result rows and the
// state asked afresh. An install can take minutes: its button stays disabled with a
// "running" note until the answer, and no other action starts meanwhile.
"use strict";
(function () {
  var rows = document.getElementById("rows");
  var select = document.getElementById("profile");
  var installsNote = document.getElementById("installs");
  var result = document.getElementById("result");
  var resultTitle = document.getElementById("result-title");
  var steps = document.getElementById("steps");
  var running = false;
  var current = { profile: new URLSearchParams(location.search).get("profile") || "" };

  function query() {
    return current.profile ? "?profile=" + encodeURIComponent(current.profile) : "";
  }

  function cell(text, cls) {
    var td = Hermes.el("td", cls ? { class: cls } : {}, text);
    return td;
  }

  function state(p) {
    if (p.available) return "available";
    if (p.missing.length) return "dependencies missing";
    if (p.env_missing.length) return "needs " + p.env_missing.join(", ");
    return "not available";
  }

  function missing(p) {
    var parts = p.missing.slice();
    (p.external || []).forEach(function (e) { if (!e.found) parts.push(e.name + " (install: " + e.install + ")"); });
    return parts.length ? parts.join(", ") : "-";
  }

  function installCell(p, installs) {
    var td = document.createElement("td");
    if (!p.missing.length) { td.textContent = "installed"; td.className = "muted"; return td; }
    if (!installs.possible) {
      td.className = "blocked";
      td.dataset.blocked = "true";
      // The hint (what to do) is said once, above the table.
      td.textContent = "blocked: " + installs.reason;
      return td;
    }
    var b = Hermes.el("button", { "data-action": "install" }, "Install");
    b.addEventListener("click", function () { act("install", p.name, b, td); });
    td.appendChild(b);
    return td;
  }

  function activateCell(p) {
    var td = document.createElement("td");
    if (p.active) { td.textContent = "active"; td.className = "state-running"; return td; }
    var b = Hermes.el("button", { "data-action": "activate" }, "Activate");
    b.addEventListener("click", function () { act("activate", p.name, b, td); });
    td.appendChild(b);
    return td;
  }

  function render(data) {
    current.profile = data.profile;
    select.textContent = "";
    (data.profiles || []).forEach(function (name) {
      var o = Hermes.el("option", { value: name }, name);
      if (name === data.profile) o.selected = true;
      select.appendChild(o);
    });
    var inst = data.installs || {};
    var gen = inst.generation || {};
    installsNote.textContent = inst.possible
      ? "Installs go to " + (inst.target ? "the durable target " + inst.target : "the Python environment " + inst.venv) + "." +
        (gen.active ? " Install generation " + gen.active + " is active." : "") +
        (gen.last_check ? " " + gen.last_check : "")
      : "Installs are blocked: " + inst.reason + (inst.hint ? " — " + inst.hint : "");
    installsNote.className = !inst.possible || gen.degraded ? "installs blocked" : "installs muted";
    rows.textContent = "";
    (data.providers || []).forEach(function (p) {
      var tr = Hermes.el("tr", { "data-plugin": p.name });
      var name = cell(p.name);
      if (p.description) name.appendChild(Hermes.el("div", { class: "muted" }, p.description));
      tr.appendChild(name);
      tr.appendChild(cell(state(p), p.available ? "state-running" : "state-stopped"));
      tr.appendChild(cell(missing(p)));
      tr.appendChild(installCell(p, inst));
      tr.appendChild(activateCell(p));
      rows.appendChild(tr);
    });
    if (data.problems && data.problems.length) Hermes.problem({ detail: data.problems.join("; ") });
  }

  function load() {
    return Hermes.api("GET", "api/plugins" + query()).then(render, Hermes.problem);
  }

  function showSteps(verb, answer) {
    resultTitle.textContent = (verb === "install" ? "Install " : "Activate ") + answer.provider + ": " +
      (answer.ok ? "done" : answer.blocked ? "blocked" : "failed");
    steps.textContent = "";
    answer.steps.forEach(function (s) {
      var tr = Hermes.el("tr", { "data-step": s.step, "data-ok": String(s.ok) });
      tr.appendChild(cell(s.step));
      tr.appendChild(cell(s.ok ? "ok" : "failed", s.ok ? "state-running" : "state-failed"));
      var detail = cell(s.detail);
      if (s.hint) detail.appendChild(Hermes.el("div", { class: "muted" }, "hint: " + s.hint));
      if (s.output) detail.appendChild(Hermes.el("pre", { class: "output" }, s.output));
      tr.appendChild(detail);
      steps.appendChild(tr);
    });
    result.hidden = false;
  }

  function act(verb, name, button, td) {
    if (running) return;
    running = true;
    Array.prototype.forEach.call(document.querySelectorAll("#rows button"), function (b) { b.disabled = true; });
    var note = Hermes.el("span", { class: "running" }, verb === "install" ? "installing… (this can take minutes)" : "activating…");
    td.appendChild(note);
    Hermes.problem(null);
    Hermes.api("POST", "api/plugins/" + encodeURIComponent(name) + "/" + verb + query())
      .then(function (answer) { showSteps(verb, answer); }, Hermes.problem)
      .then(function () { running = false; return load(); });
  }

  select.addEventListener("change", function () {
    current.profile = select.value;
    history.replaceState(null, "", "plugins" + query());
    result.hidden = true;
    load();
  });
  load();
})();
