// The Logs page (see src/pages/logs.rs): the last lines of the chosen service's log, then
// what is appended, over server-sent events that resume from their last id. A filter hides
// lines without the text (case-insensitive); the view follows the end while the reader is
// there and pauses — counting what arrives — when they scroll up.
"use strict";
(function () {
  var MAX_SHOWN = 5000;     // lines kept in the page; older ones are dropped
  var TAIL = 500;           // lines shown when a service is opened
  var picker = document.getElementById("log-service");
  var filterBox = document.getElementById("log-filter");
  var view = document.getElementById("log");
  var paused = document.getElementById("log-paused");
  var download = document.getElementById("log-download");
  var state = document.getElementById("log-state");
  var source = null;        // the EventSource of the service shown
  var retry = null;         // a timer waiting for a log that does not exist yet
  var following = true;     // the view is at the bottom and stays there
  var missed = 0;           // lines arrived while paused
  var needle = "";
  var standing = null;      // the supervisor's unreachability, kept in the banner

  function api(path) { return "api/logs/" + encodeURIComponent(picker.value) + path; }

  function matches(text) { return needle === "" || text.toLowerCase().indexOf(needle) !== -1; }

  function add(text, cls) {
    var line = Hermes.el("div", { class: cls || "log-line" }, text);
    line.hidden = !matches(text);
    view.appendChild(line);
  }

  function trim() {
    while (view.childElementCount > MAX_SHOWN) view.removeChild(view.firstElementChild);
  }

  function atBottom() { return view.scrollTop + view.clientHeight >= view.scrollHeight - 4; }

  function toBottom() {
    view.scrollTop = view.scrollHeight;
    following = true;
    missed = 0;
    paused.hidden = true;
  }

  // New lines: follow the end, or count them while the reader is elsewhere.
  function arrived(lines) {
    lines.forEach(function (l) { add(l); });
    trim();
    if (following) { toBottom(); return; }
    missed += lines.length;
    paused.hidden = false;
    paused.textContent = "paused — " + missed + " new line" + (missed === 1 ? "" : "s") + " · back to the end";
  }

  function note(text) { add(text, "log-note"); }

  function close() {
    if (source) { source.close(); source = null; }
    if (retry) { clearTimeout(retry); retry = null; }
  }

  function open() {
    close();
    view.textContent = "";
    toBottom();
    if (!picker.value) { state.textContent = "no service has a log yet"; download.hidden = true; return; }
    history.replaceState(null, "", "logs?service=" + encodeURIComponent(picker.value));
    download.href = api("/download");
    download.hidden = false;
    state.textContent = "loading…";
    var name = picker.value;
    Hermes.api("GET", api("?lines=" + TAIL)).then(function (tail) {
      if (name !== picker.value) return;
      Hermes.problem(standing);
      tail.lines.forEach(function (l) { add(l); });
      toBottom();
      listen(tail.cursor);
    }, function (err) {
      if (name !== picker.value) return;
      Hermes.problem(err);
      state.textContent = "";
      // A service that has not written yet: look again shortly.
      if (err.status === 404) retry = setTimeout(open, 3000);
    });
  }

  // Follows from `cursor`; on a reconnect the browser sends the last event's id instead.
  function listen(cursor) {
    var es = new EventSource(api("/events?from=" + encodeURIComponent(cursor)));
    source = es;
    es.addEventListener("start", function (e) {
      var d = JSON.parse(e.data);
      state.textContent = "live";
      if (d.restarted) note("— the log was rotated or truncated meanwhile: from its beginning —");
    });
    es.addEventListener("lines", function (e) { arrived(JSON.parse(e.data).lines); });
    es.addEventListener("rotated", function (e) {
      note(JSON.parse(e.data).truncated ? "— the log was truncated: from its beginning —" : "— the log was rotated: a new file —");
    });
    es.addEventListener("problem", function (e) { Hermes.problem(JSON.parse(e.data)); });
    es.onerror = function () {
      if (source !== es) return;
      if (es.readyState !== EventSource.CLOSED) { state.textContent = "connection lost; reconnecting…"; return; }
      // Refused on reconnecting (the log is gone, the dashboard restarted): start over shortly.
      state.textContent = "disconnected; reopening…";
      close();
      retry = setTimeout(open, 3000);
    };
  }

  function applyFilter() {
    needle = filterBox.value.toLowerCase();
    Array.prototype.forEach.call(view.children, function (line) {
      if (line.className === "log-line") line.hidden = !matches(line.textContent);
    });
    if (following) toBottom();
  }

  function fill(services, wanted) {
    picker.textContent = "";
    var names = services.map(function (s) { return s.name; });
    if (wanted && names.indexOf(wanted) === -1) names.unshift(wanted);
    names.forEach(function (n) {
      var s = services.filter(function (x) { return x.name === n; })[0];
      var label = n + (s && s.state ? " (" + s.state + ")" : "") + (s && !s.log ? " — no log yet" : "");
      picker.appendChild(Hermes.el("option", { value: n }, label));
    });
    var withLog = services.filter(function (s) { return s.log; })[0];
    picker.value = wanted || (withLog ? withLog.name : names[0] || "");
  }

  view.addEventListener("scroll", function () {
    if (atBottom()) toBottom();
    else following = false;
  });
  paused.addEventListener("click", toBottom);
  picker.addEventListener("change", open);
  filterBox.addEventListener("input", applyFilter);

  var wanted = new URLSearchParams(location.search).get("service");
  Hermes.api("GET", "api/logs").then(function (list) {
    var sup = list.supervisor || {};
    if (!sup.reachable) standing = { detail: "Supervisor not reachable: " + (sup.error || ""), hint: sup.hint };
    Hermes.problem(standing);
    fill(list.services || [], wanted);
    open();
  }, Hermes.problem);
})();
