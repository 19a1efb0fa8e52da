// The Overview: rows from `status` server-sent events, buttons POST through Hermes.api.
"use strict";
(function () {
  var body = document.getElementById("rows");
  var banner = document.getElementById("banner");
  var mode = document.getElementById("gateway-mode");
  var volume = document.getElementById("volume");
  var live = Hermes.live;
  var SVG = "http://www.w3.org/2000/svg";

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
  // 15 minutes as inline SVG: memory low to high, CPU % from 0 to its peak (>= 5).
  function sparkline(s) {
    var h = (s.resources && s.resources.history) || [];
    if (h.length < 2) return null;
    var W = 90, H = 20;
    var mem = h.map(function (p) { return p.memory_bytes; });
    var low = Math.min.apply(null, mem), high = Math.max.apply(null, mem);
    var cpuTop = Math.max.apply(null, [5].concat(h.map(function (p) { return p.cpu_percent; })));
    function line(value, min, max, cls) {
      var pts = h.map(function (p, i) {
        var y = H - 1 - (max > min ? (value(p) - min) / (max - min) : 0.5) * (H - 2);
        return (i * W / (h.length - 1)).toFixed(1) + "," + y.toFixed(1);
      }).join(" ");
      var l = document.createElementNS(SVG, "polyline");
      l.setAttribute("points", pts);
      l.setAttribute("class", cls);
      return l;
    }
    var svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("class", "spark");
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    svg.setAttribute("preserveAspectRatio", "none");
    svg.setAttribute("role", "img");
    var title = document.createElementNS(SVG, "title");
    title.textContent = "memory and CPU, last " + Math.round((h[h.length - 1].at - h[0].at) / 60) + " min";
    svg.appendChild(title);
    svg.appendChild(line(function (p) { return p.cpu_percent; }, 0, cpuTop, "spark-cpu"));
    svg.appendChild(line(function (p) { return p.memory_bytes; }, low, high, "spark-mem"));
    return svg;
  }
  function memory(s) {
    var td = cell("", "memory");
    td.appendChild(Hermes.el("span", { class: "figure" }, s.memory_text || "-"));
    var svg = sparkline(s);
    if (svg) td.appendChild(svg);
    return td;
  }
  function cpu(s) {
    var r = s.resources;
    if (!r || !s.pid) return cell(null);
    var pct = r.cpu_percent === null || r.cpu_percent === undefined ? "-" : r.cpu_percent.toFixed(1) + " %";
    return cell(pct + " · " + r.cpu_seconds.toFixed(1) + " s", "cpu");
  }
  function showVolume(v) {
    volume.hidden = !v;
    if (!v) return;
    volume.classList.toggle("degraded", !!v.degraded);
    volume.textContent = "Volume " + v.path + ": " + (v.error ? "cannot be read (" + v.error + ")" : v.text) + (v.degraded ? " — nearly full" : "");
  }
  function act(name, verb) {
    Hermes.api("POST", "api/services/" + encodeURIComponent(name) + "/" + verb)
      .then(function (r) { Hermes.problem(r && r.detail ? r : null); }, Hermes.problem);
  }
  function render(snap) {
    var sup = snap.supervisor || {};
    banner.hidden = !!sup.reachable;
    banner.textContent = sup.reachable ? "" : "Supervisor not reachable: " + (sup.error || "") + (sup.hint ? " — " + sup.hint : "");
    // Multiplexing: one gateway serves every profile, the others never start.
    var g = snap.gateway_routing || {};
    mode.hidden = g.mode !== "multiplexed";
    mode.textContent = mode.hidden ? "" : "Multiplexed (" + g.source + ", " + g.engine + " engine): gateway-default serves " + (g.serves || []).join(", ");
    showVolume(snap.volume);
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
      tr.appendChild(memory(s));
      tr.appendChild(cpu(s));
      tr.appendChild(cell(s.restarts));
      tr.appendChild(cell(s.last_exit_text || "-"));
      // Beside the reason, as `service status`: the last error, damaged databases.
      var why = [s.reason, s.last_error].concat((s.damaged_databases || []).map(function (d) { return "database: " + d.text; }));
      tr.appendChild(cell(s.served_by ? "served by " + s.served_by : why.filter(Boolean).join(" — ")));
      tr.appendChild(cell(s.port));
      tr.appendChild(cell(s.engine));
      var td = document.createElement("td");
      // Buttons by state; the dashboard's own row asks first (it serves this).
      var on = ["up", "starting", "backoff"].indexOf(s.state) >= 0;
      ["start", "stop", "restart"].forEach(function (verb) {
        var b = document.createElement("button");
        b.textContent = verb[0].toUpperCase() + verb.slice(1);
        b.dataset.action = verb;
        b.disabled = verb === "start" ? on || s.state === "stopping" : !on;
        b.addEventListener("click", function () {
          if (s.name !== "dashboard" || verb === "start" || confirm(verb[0].toUpperCase() + verb.slice(1) + " the dashboard? This page is served by it.")) act(s.name, verb);
        });
        td.appendChild(b);
      });
      tr.appendChild(td);
      body.appendChild(tr);
    });
  }
  // The System view: asked once (the lines come worded by the dashboard).
  Hermes.api("GET", "api/system").then(function (v) {
    var dl = document.getElementById("system");
    v.items.forEach(function (i) {
      dl.appendChild(Hermes.el("dt", {}, i.label));
      dl.appendChild(Hermes.el("dd", { class: i.warning ? "warn" : "", "data-item": i.name }, i.text));
    });
    dl.hidden = false;
  }, Hermes.problem);
  var source = new EventSource("api/events");
  source.addEventListener("status", function (e) { live.textContent = "live"; render(JSON.parse(e.data)); });
  source.onerror = function () { live.textContent = "connection to the dashboard lost; retrying"; };
})();
