// The Cron page (see src/pages/cron.rs): a profile's scheduled jobs, whether the agent's
// scheduler ticks, pause / resume / run now (made by the agent), and a job's last output.
// Stored text (names, errors, output) goes into the page as text, never as HTML.
"use strict";
(function () {
  var el = Hermes.el;
  var profile = document.getElementById("profile");
  var rows = document.querySelector("#jobs tbody");
  var actions = true;

  function q() { return "?profile=" + encodeURIComponent(profile.value); }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  function when(iso) {
    if (!iso) return "—";
    var d = new Date(iso);
    return isNaN(d.getTime()) ? String(iso) : d.toLocaleString();
  }
  function result(job) {
    if (!job.last_status) return "—";
    return job.last_status + (job.last_error ? ": " + job.last_error : "");
  }

  function button(job, verb, label) {
    var b = el("button", { type: "button", "data-action": verb }, label);
    b.disabled = !actions;
    if (!actions) b.title = "No agent is installed: the agent's own code changes jobs";
    b.addEventListener("click", function () {
      b.disabled = true;
      Hermes.api("POST", "api/cron/jobs/" + encodeURIComponent(job.id) + "/" + verb + q()).then(function () {
        Hermes.problem(null);
        return load();
      }, function (err) { b.disabled = false; Hermes.problem(err); });
    });
    return b;
  }

  function row(job) {
    var tr = el("tr", { "data-id": job.id, "data-state": job.state });
    var name = el("td", { class: "clickable", tabindex: "0" }, job.name);
    name.appendChild(el("div", { class: "muted" }, job.id));
    name.addEventListener("click", function () { detail(job.id); });
    name.addEventListener("keydown", function (e) { if (e.key === "Enter") detail(job.id); });
    tr.appendChild(name);
    tr.appendChild(el("td", {}, job.schedule_display));
    tr.appendChild(el("td", { class: "state" }, job.state));
    tr.appendChild(el("td", {}, job.enabled === false ? "—" : when(job.next_run_at)));
    tr.appendChild(el("td", {}, when(job.last_run_at)));
    tr.appendChild(el("td", { class: job.last_status && job.last_status !== "ok" ? "error" : "" }, result(job)));
    var cell = el("td");
    if (job.state === "paused") cell.appendChild(button(job, "resume", "Resume"));
    else if (job.state !== "completed") cell.appendChild(button(job, "pause", "Pause"));
    cell.appendChild(document.createTextNode(" "));
    cell.appendChild(button(job, "trigger", "Run now"));
    tr.appendChild(cell);
    return tr;
  }

  function detail(id) {
    Hermes.api("GET", "api/cron/jobs/" + encodeURIComponent(id) + q()).then(function (job) {
      document.getElementById("detail").hidden = false;
      document.getElementById("detail-name").textContent = job.name + " — last output";
      document.getElementById("detail-output").textContent = job.last_output
        ? job.last_output.file + "\n\n" + job.last_output.excerpt
        : "No saved output yet.";
    }, Hermes.problem);
  }

  function load() {
    return Hermes.api("GET", "api/cron/status" + q()).then(function (s) {
      actions = s.actions;
      var line = document.getElementById("scheduler");
      line.textContent = s.summary + (s.actions ? "" : " Changing jobs is off: " + s.actions_note + ".");
      line.className = s.ticking && !s.ticker.last_error ? "muted" : "warning";
      document.getElementById("path").textContent = s.jobs_file;
      return Hermes.api("GET", "api/cron/jobs" + q());
    }).then(function (jobs) {
      Hermes.problem(null);
      clear(rows);
      jobs.forEach(function (job) { rows.appendChild(row(job)); });
      document.getElementById("empty").hidden = jobs.length > 0;
    }).catch(function (err) { clear(rows); Hermes.problem(err); });
  }

  profile.addEventListener("change", function () {
    document.getElementById("detail").hidden = true;
    load();
  });
  load();
  // Next and last runs move while the page is open: the file is re-read every 30 s.
  setInterval(load, 30000);
})();
