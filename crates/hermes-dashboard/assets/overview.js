// The Overview: rows from `status` server-sent events, buttons POST through Hermes.api.
"use strict";
(function () {
  var body = document.getElementById("rows");
  var banner = document.getElementById("banner");
  var mode = document.getElementById("gateway-mode");
  var live = Hermes.live;

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
    Hermes.api("POST", "api/services/" + encodeURIComponent(name) + "/" + verb)
      .then(function () { Hermes.problem(null); }, Hermes.problem);
  }
  function render(snap) {
    var sup = snap.supervisor || {};
    banner.hidden = !!sup.reachable;
    banner.textContent = sup.reachable ? "" : "Supervisor not reachable: " + (sup.error || "") + (sup.hint ? " — " + sup.hint : "");
    // Multiplexing: one gateway serves every profile; the others are registered, never started.
    var g = snap.gateways || {};
    mode.hidden = g.mode !== "multiplexed";
    mode.textContent = mode.hidden ? "" : "Multiplexed (" + g.source + ", " + g.engine + " engine): gateway-default serves " + (g.serves || []).join(", ");
    body.textContent = "";
    (snap.services || []).forEach(function (s) {
      var tr = document.createElement("tr");
      tr.dataset.service = s.name;
      var name = cell("");
      var link = Hermes.el("a", { href: "logs?service=" + encodeURIComponent(s.name), title: "Log" }, s.name);
      name.appendChild(link);
      tr.appendChild(name);
      tr.appendChild(cell(s.state, "state-" + s.state));
      tr.appendChild(cell(s.pid));
      tr.appendChild(cell(duration(s.uptime_secs)));
      tr.appendChild(cell(s.restarts));
      tr.appendChild(cell(exit(s.last_exit)));
      // A failing service's last error (its log's, or its recorded failed start) beside the
      // supervisor's reason, as `hermes service status` shows it.
      tr.appendChild(cell(s.served_by ? "served by " + s.served_by : (s.reason || "") + (s.last_error ? " — " + s.last_error : "")));
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
