// The diagnostics page (see src/pages/diagnostics.rs): `hermes doctor`'s checks as rows
// (✓ ⚠ ✗ with the fix) and `hermes dump`'s text in a <pre>, each copyable for a bug report.
"use strict";
(function () {
  var SYMBOL = { ok: "✓", warn: "⚠", fail: "✗" };
  var checks = document.getElementById("checks");
  var summary = document.getElementById("doctor-summary");
  var dump = document.getElementById("dump");
  var copyDump = document.getElementById("copy-dump");
  var copyDoctor = document.getElementById("copy-doctor");
  var copied = document.getElementById("copied");
  var copiedDoctor = document.getElementById("copied-doctor");
  var doctorText = document.getElementById("doctor-text");

  function row(c) {
    var tr = Hermes.el("tr", { class: "check check-" + c.status, "data-status": c.status });
    tr.appendChild(Hermes.el("td", { class: "symbol", title: c.status }, SYMBOL[c.status] || c.status));
    tr.appendChild(Hermes.el("td", { class: "message" }, c.message));
    tr.appendChild(Hermes.el("td", { class: "fix" }, c.fix || ""));
    return tr;
  }

  function count(list, status) {
    return list.filter(function (c) { return c.status === status; }).length;
  }

  function showDoctor(report) {
    while (checks.firstChild) checks.removeChild(checks.firstChild);
    report.checks.forEach(function (c) { checks.appendChild(row(c)); });
    var fails = count(report.checks, "fail");
    var warns = count(report.checks, "warn");
    summary.textContent = "profile " + report.profile + " — " +
      (fails + warns === 0 ? "all checks passed" : fails + " failed, " + warns + " warning" + (warns === 1 ? "" : "s"));
  }

  // Copies the text of `pre`: the Clipboard API where the page may use it (a secure context),
  // else the text is selected and copied the old way, or left selected for Ctrl+C. `status`
  // says which.
  function copy(pre, status) {
    function said(what) { status.textContent = what; }
    function select() {
      var details = pre.closest("details");
      if (details) details.open = true;
      var range = document.createRange();
      range.selectNodeContents(pre);
      var sel = window.getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
      var ok = false;
      try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
      said(ok ? "Copied." : "Selected: press Ctrl+C to copy.");
    }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(pre.textContent).then(function () { said("Copied."); }, select);
    } else {
      select();
    }
  }

  copyDump.addEventListener("click", function () { copy(dump, copied); });
  copyDoctor.addEventListener("click", function () { copy(doctorText, copiedDoctor); });

  // Both reports are about the picked profile (`?profile=`, kept in the address by common.js).
  var profile = document.getElementById("profile");
  function load() {
    var query = "profile=" + encodeURIComponent(profile.value);
    Hermes.problem(null);
    copyDoctor.disabled = true;
    copyDump.disabled = true;
    Hermes.api("GET", "api/diagnostics/doctor?" + query).then(function (report) {
      showDoctor(report);
      return fetch("api/diagnostics/doctor?format=text&" + query, { credentials: "same-origin" }).then(function (r) {
        if (!r.ok) throw { status: r.status, detail: "the doctor's text: " + r.status + " " + r.statusText };
        return r.text();
      });
    }).then(function (text) {
      doctorText.textContent = text;
      copyDoctor.disabled = false;
    }, Hermes.problem);

    Hermes.api("GET", "api/diagnostics/dump?" + query).then(function (data) {
      dump.textContent = data.text;
      copyDump.disabled = false;
    }, function (err) {
      dump.textContent = "";
      Hermes.problem(err);
    });
  }
  profile.addEventListener("change", load);
  load();
})();
