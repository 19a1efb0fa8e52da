// The sessions page (see src/pages/sessions.rs): a profile's sessions newest first, one
// session's messages, a search. Read-only. Every stored text goes into the page as text
// (textContent via Hermes.el), never as HTML: a message can hold anything.
"use strict";
(function () {
  var profile = document.getElementById("profile");
  var form = document.getElementById("search");
  var q = document.getElementById("q");
  var clear = document.getElementById("clear");
  var rows = document.getElementById("sessions");
  var more = document.getElementById("more");
  var results = document.getElementById("results");
  var table = rows.closest("table");
  var detail = document.getElementById("detail");
  var next = null;

  function query(extra) {
    var p = new URLSearchParams({ profile: profile.value });
    Object.keys(extra || {}).forEach(function (k) { p.set(k, extra[k]); });
    return p.toString();
  }

  function when(seconds) {
    return seconds ? new Date(seconds * 1000).toLocaleString() : "";
  }

  function clearChildren(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  function row(s) {
    var tr = Hermes.el("tr", { "data-id": s.id, class: "clickable", tabindex: "0" });
    tr.appendChild(Hermes.el("td", {}, when(s.started_at)));
    tr.appendChild(Hermes.el("td", { class: "title" }, s.title || s.preview || s.id));
    tr.appendChild(Hermes.el("td", {}, s.source));
    tr.appendChild(Hermes.el("td", {}, s.model || ""));
    tr.appendChild(Hermes.el("td", { class: "num" }, s.message_count));
    function open() { show(s.id); }
    tr.addEventListener("click", open);
    tr.addEventListener("keydown", function (e) { if (e.key === "Enter") open(); });
    return tr;
  }

  // One page of the list; `before` continues after the previous page's last session.
  function load(before) {
    var extra = before ? { before: before } : {};
    return Hermes.api("GET", "api/sessions?" + query(extra)).then(function (data) {
      Hermes.problem(null);
      if (!before) clearChildren(rows);
      data.sessions.forEach(function (s) { rows.appendChild(row(s)); });
      if (!before && data.sessions.length === 0) {
        var tr = Hermes.el("tr", { class: "empty" });
        tr.appendChild(Hermes.el("td", { colspan: "5" }, "No sessions in profile " + data.profile + "."));
        rows.appendChild(tr);
      }
      next = data.next;
      more.hidden = !next;
    }, errorRow);
  }

  // A failed read shows as a row in the list (and in the banner), not as an empty list.
  function errorRow(err) {
    Hermes.problem(err);
    clearChildren(rows);
    var tr = Hermes.el("tr", { class: "error" });
    tr.appendChild(Hermes.el("td", { colspan: "5" }, (err.detail || String(err)) + (err.hint ? " — " + err.hint : "")));
    rows.appendChild(tr);
    more.hidden = true;
  }

  function message(m, highlight) {
    var li = Hermes.el("li", { class: "msg role-" + m.role + (m.active ? "" : " inactive"), "data-id": m.id, id: "m" + m.id });
    li.appendChild(Hermes.el("div", { class: "role" }, m.role + (m.tool_name ? " · " + m.tool_name : "") + (m.active ? "" : " (not replayed)")));
    li.appendChild(Hermes.el("div", { class: "content" }, m.content || ""));
    if (m.tool_calls) li.appendChild(Hermes.el("pre", { class: "tool-calls" }, m.tool_calls));
    if (String(m.id) === String(highlight)) li.classList.add("hit");
    return li;
  }

  // One session's messages in the detail pane; `highlight` names a message to scroll to.
  function show(id, highlight) {
    return Hermes.api("GET", "api/sessions/" + encodeURIComponent(id) + "?" + query()).then(function (data) {
      Hermes.problem(null);
      clearChildren(detail);
      var s = data.session;
      detail.appendChild(Hermes.el("h3", { id: "session-title" }, s.title || s.preview || s.id));
      detail.appendChild(Hermes.el("p", { class: "muted" },
        s.id + " · " + s.source + (s.model ? " · " + s.model : "") + " · " + when(s.started_at)));
      var list = Hermes.el("ol", { id: "messages", class: "messages" });
      data.messages.forEach(function (m) { list.appendChild(message(m, highlight)); });
      if (data.messages.length === 0) list.appendChild(Hermes.el("li", { class: "muted" }, "No messages."));
      detail.appendChild(list);
      var hit = highlight && document.getElementById("m" + highlight);
      if (hit) hit.scrollIntoView({ block: "center" });
    }, Hermes.problem);
  }

  // A snippet with its hits (between >>> and <<<) as <mark>, all as text nodes.
  function snippet(text) {
    var span = Hermes.el("span", { class: "snippet" });
    text.split(">>>").forEach(function (part, i) {
      if (i === 0) { span.appendChild(document.createTextNode(part)); return; }
      var end = part.indexOf("<<<");
      var hit = end < 0 ? part : part.slice(0, end);
      span.appendChild(Hermes.el("mark", {}, hit));
      if (end >= 0) span.appendChild(document.createTextNode(part.slice(end + 3)));
    });
    return span;
  }

  function search(text) {
    return Hermes.api("GET", "api/sessions/search?" + query({ q: text })).then(function (data) {
      Hermes.problem(null);
      clearChildren(results);
      table.hidden = true;
      more.hidden = true;
      results.hidden = false;
      clear.hidden = false;
      if (data.results.length === 0) results.appendChild(Hermes.el("li", { class: "muted" }, "Nothing found."));
      data.results.forEach(function (h) {
        var li = Hermes.el("li", { class: "result clickable", "data-session": h.session_id, tabindex: "0" });
        li.appendChild(Hermes.el("div", { class: "muted" }, (h.title || h.session_id) + " · " + h.role + " · " + when(h.session_started)));
        li.appendChild(snippet(h.snippet));
        function open() { show(h.session_id, h.message_id); }
        li.addEventListener("click", open);
        li.addEventListener("keydown", function (e) { if (e.key === "Enter") open(); });
        results.appendChild(li);
      });
    }, Hermes.problem);
  }

  function backToList() {
    results.hidden = true;
    clear.hidden = true;
    table.hidden = false;
    more.hidden = !next;
  }

  form.addEventListener("submit", function (e) {
    e.preventDefault();
    if (q.value.trim()) search(q.value); else backToList();
  });
  clear.addEventListener("click", function () { q.value = ""; backToList(); });
  more.addEventListener("click", function () { if (next) load(next); });
  profile.addEventListener("change", function () {
    clearChildren(detail);
    backToList();
    load(null);
  });
  load(null);
})();
