// The Overview: rows from `status` server-sent events, buttons POST with the session token
// (the CSRF check); no framework, no external resource.
"use strict";
(function () {
  var token = document.querySelector('meta[name="hermes-token"]').content;
  var body = document.getElementById("rows");
  var banner = document.getElementById("banner");
  var live = document.getElementById("live");

  function cell(text, cls) {
    var td = document.createElement("td");
    td.textContent = text === null || text === undefined ? "-" : String(text);
    if (cls) td.className = cls;
    return td;
  }
  function duration(s) {
    if (s === null || s === undefined) return "-";
    s = Math.floor(s);
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m" + (s % 60) + "s";
    return Math.floor(s / 3600) + "h" + Math.floor((s % 3600) / 60) + "m";
  }
  function exit(e) {
    if (!e) return "-";
    return typeof e === "object" ? JSON.stringify(e) : String(e);
  }
  function act(name, verb) {
    fetch("api/services/" + encodeURIComponent(name) + "/" + verb, {
      method: "POST", headers: { "X-Hermes-Session-Token": token }, credentials: "same-origin"
    }).then(function (r) {
      if (!r.ok) return r.json().then(function (j) { alert(j.detail + (j.hint ? "\n" + j.hint : "")); });
    });
  }
  function render(snap) {
    var sup = snap.supervisor || {};
    banner.hidden = !!sup.reachable;
    banner.textContent = sup.reachable ? "" : "Supervisor not reachable: " + (sup.error || "") + (sup.hint ? " — " + sup.hint : "");
    body.textContent = "";
    (snap.services || []).forEach(function (s) {
      var tr = document.createElement("tr");
      tr.dataset.service = s.name;
      tr.appendChild(cell(s.name));
      tr.appendChild(cell(s.state, "state-" + s.state));
      tr.appendChild(cell(s.pid));
      tr.appendChild(cell(duration(s.uptime_secs)));
      tr.appendChild(cell(s.restarts));
      tr.appendChild(cell(exit(s.last_exit)));
      tr.appendChild(cell(s.reason || ""));
      tr.appendChild(cell(s.port));
      tr.appendChild(cell(s.engine));
      var td = document.createElement("td");
      ["start", "stop", "restart"].forEach(function (verb) {
        var b = document.createElement("button");
        b.textContent = verb[0].toUpperCase() + verb.slice(1);
        b.dataset.action = verb;
        b.addEventListener("click", function () { act(s.name, verb); });
        td.appendChild(b);
      });
      tr.appendChild(td);
      body.appendChild(tr);
    });
  }
  var source = new EventSource("api/events");
  source.addEventListener("status", function (e) { live.textContent = "live"; render(JSON.parse(e.data)); });
  source.onerror = function () { live.textContent = "connection to the dashboard lost; retrying"; };
})();
