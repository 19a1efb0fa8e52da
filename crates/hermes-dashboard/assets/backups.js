// The Backups page (see src/pages/backups.rs): the archives of `api/backups` with a download
// link and a Restore button each, Create (its progress polled from the list while it runs),
// Upload (its progress from the browser), and a restore in two steps: the plan is shown
// first, and Restore sends the plan's token, so only the plan shown is applied.
"use strict";
(function () {
  var rows = document.getElementById("rows");
  var dirNote = document.getElementById("dir");
  var scheduleNote = document.getElementById("schedule");
  var createButton = document.getElementById("create");
  var createStatus = document.getElementById("create-status");
  var createError = document.getElementById("create-error");
  var uploadForm = document.getElementById("upload-form");
  var uploadFile = document.getElementById("upload-file");
  var uploadButton = document.getElementById("upload");
  var uploadStatus = document.getElementById("upload-status");
  var uploadError = document.getElementById("upload-error");
  var planBox = document.getElementById("plan");
  var planTitle = document.getElementById("plan-title");
  var planSummary = document.getElementById("plan-summary");
  var planSchema = document.getElementById("plan-schema");
  var planRestarts = document.getElementById("plan-restarts");
  var planLists = document.getElementById("plan-lists");
  var forceLine = document.getElementById("force-line");
  var force = document.getElementById("force");
  var confirmButton = document.getElementById("confirm");
  var cancelButton = document.getElementById("cancel");
  var restoreStatus = document.getElementById("restore-status");
  var planError = document.getElementById("plan-error");
  var originalBox = document.getElementById("original");
  var originalRows = document.getElementById("original-rows");
  var shown = null; // {name, token, refused} of the plan on screen
  var working = false;

  // An error inline in `box` (or cleared with null).
  function inline(box, err) {
    if (!err) { box.hidden = true; box.textContent = ""; return; }
    box.hidden = false;
    box.textContent = (err.detail || String(err)) + (err.hint ? " — " + err.hint : "");
  }

  function size(n) {
    if (n === null || n === undefined) return "";
    if (n < 1024) return n + " B";
    var units = ["KiB", "MiB", "GiB", "TiB"];
    var i = -1;
    do { n /= 1024; i++; } while (n >= 1024 && i < units.length - 1);
    return n.toFixed(n < 10 ? 1 : 0) + " " + units[i];
  }

  function when(iso) {
    return iso ? iso.replace("T", " ").replace("Z", " UTC") : "";
  }

  function busy(on) {
    working = on;
    createButton.disabled = on;
    uploadButton.disabled = on;
    confirmButton.disabled = on || !!(shown && shown.refused && !force.checked);
    Array.prototype.forEach.call(rows.querySelectorAll("button"), function (b) { b.disabled = on; });
  }

  function row(a) {
    var tr = Hermes.el("tr", { "data-archive": a.name });
    tr.appendChild(Hermes.el("td", { class: "name" }, a.name));
    tr.appendChild(Hermes.el("td", { class: "num" }, size(a.size)));
    tr.appendChild(Hermes.el("td", {}, when(a.modified)));
    tr.appendChild(Hermes.el("td", { class: a.scheduled ? "scheduled" : "muted" }, a.scheduled ? "scheduled" : "manual"));
    var td = document.createElement("td");
    var link = Hermes.el("a", { href: "api/backups/" + encodeURIComponent(a.name), download: a.name, "data-action": "download" }, "Download");
    td.appendChild(link);
    td.appendChild(document.createTextNode(" "));
    var b = Hermes.el("button", { type: "button", "data-action": "plan" }, "Restore…");
    b.disabled = working;
    b.addEventListener("click", function () { showPlan(a.name); });
    td.appendChild(b);
    tr.appendChild(td);
    return tr;
  }

  function scheduleText(s) {
    if (!s) return null;
    if (s.unreadable) return "Scheduled backups: " + s.unreadable;
    var parts = [];
    if (s.last_run) {
      parts.push("last run " + when(s.last_run) + ": " + (s.ok
        ? "ok" + (s.file ? " (" + s.file + (s.size ? ", " + size(s.size) : "") + ")" : "")
        : "failed" + (s.error ? " — " + s.error : "") + (s.last_success ? " (last success " + when(s.last_success) + ")" : "")));
    } else {
      parts.push("not run yet");
    }
    if (s.next_run) parts.push("next run " + when(s.next_run));
    return "Scheduled backups" + (s.schedule ? " (" + s.schedule + ")" : "") + ": " + parts.join("; ") + ".";
  }

  function progressText(p) {
    if (!p || !p.files_total) return "Creating…";
    var pct = p.bytes_total ? Math.floor(100 * p.bytes_done / p.bytes_total) : 0;
    return "Creating… " + p.files_done + " of " + p.files_total + " files (" + pct + " %)";
  }

  function show(data) {
    dirNote.textContent = data.dir;
    var s = scheduleText(data.schedule);
    scheduleNote.hidden = !s;
    scheduleNote.textContent = s || "";
    if (data.schedule && (data.schedule.unreadable || data.schedule.ok === false)) scheduleNote.className = "error";
    else scheduleNote.className = "muted";
    while (rows.firstChild) rows.removeChild(rows.firstChild);
    if (!data.archives.length) {
      rows.appendChild(Hermes.el("tr", { class: "empty" })).appendChild(Hermes.el("td", { colspan: "5", class: "muted" }, "No archives yet: create one, or upload one."));
    }
    data.archives.forEach(function (a) { rows.appendChild(row(a)); });
    showOriginal(data.original);
    if (data.creating && working) createStatus.textContent = progressText(data.creating);
    else if (data.creating) createStatus.textContent = "Another page is creating " + data.creating.name + "…";
    else if (!working && createStatus.className !== "done") createStatus.textContent = "";
    return data;
  }

  // The original's archives (its `hermes backup` writes them in its home): Copy in puts one
  // in the backups directory, where the list above takes it.
  function showOriginal(places) {
    originalRows.textContent = "";
    originalBox.hidden = !places || !places.length;
    (places || []).forEach(function (place) {
      place.archives.forEach(function (a) {
        var tr = Hermes.el("tr", { "data-original": a.name });
        tr.appendChild(Hermes.el("td", { class: "name" }, a.name));
        tr.appendChild(Hermes.el("td", { class: "muted" }, place.dir));
        tr.appendChild(Hermes.el("td", { class: "num" }, size(a.size)));
        tr.appendChild(Hermes.el("td", {}, when(a.modified)));
        var b = Hermes.el("button", { type: "button", "data-action": "adopt" }, "Copy in");
        b.addEventListener("click", function () {
          b.disabled = true;
          Hermes.api("POST", "api/backups/adopt", { dir: place.dir, name: a.name })
            .then(function () { Hermes.problem(null); }, Hermes.problem)
            .then(refresh);
        });
        tr.appendChild(Hermes.el("td", {})).appendChild(b);
        originalRows.appendChild(tr);
      });
    });
  }

  function refresh() {
    return Hermes.api("GET", "api/backups").then(show, function (err) { Hermes.problem(err); });
  }

  createButton.addEventListener("click", function () {
    if (working) return;
    inline(createError, null);
    busy(true);
    createStatus.className = "running";
    createStatus.textContent = "Creating…";
    var poll = setInterval(refresh, 500);
    Hermes.api("POST", "api/backups").then(function (r) {
      createStatus.className = "done";
      createStatus.dataset.name = r.name;
      createStatus.textContent = "Created " + r.name + ": " + r.files + " files, " + size(r.size) + ".";
    }, function (err) {
      createStatus.className = "";
      createStatus.textContent = "";
      inline(createError, err);
    }).then(function () {
      clearInterval(poll);
      busy(false);
      return refresh();
    });
  });

  // An upload through XMLHttpRequest, for its progress events.
  uploadForm.addEventListener("submit", function (ev) {
    ev.preventDefault();
    if (working) return;
    var file = uploadFile.files && uploadFile.files[0];
    inline(uploadError, null);
    if (!file) { inline(uploadError, { detail: "choose an archive (.zip) first" }); return; }
    busy(true);
    uploadStatus.className = "running";
    uploadStatus.textContent = "Uploading…";
    var xhr = new XMLHttpRequest();
    xhr.open("POST", "api/backups/upload?name=" + encodeURIComponent(file.name));
    xhr.setRequestHeader("X-Hermes-Session-Token", Hermes.token);
    xhr.setRequestHeader("Content-Type", "application/zip");
    xhr.upload.onprogress = function (e) {
      if (e.lengthComputable) uploadStatus.textContent = "Uploading… " + Math.floor(100 * e.loaded / e.total) + " %";
    };
    xhr.upload.onload = function () { uploadStatus.textContent = "Verifying…"; };
    function done(err, r) {
      busy(false);
      if (err) {
        uploadStatus.className = "";
        uploadStatus.textContent = "";
        inline(uploadError, err);
      } else {
        uploadStatus.className = "done";
        uploadStatus.textContent = "Uploaded and verified: " + r.name + " (" + r.files + " files).";
        uploadForm.reset();
      }
      refresh();
    }
    xhr.onload = function () {
      var json = null;
      try { json = JSON.parse(xhr.responseText); } catch (e) { json = null; }
      if (xhr.status >= 200 && xhr.status < 300) done(null, json);
      else done({ status: xhr.status, detail: (json && json.detail) || xhr.statusText, hint: json && json.hint });
    };
    xhr.onerror = function () { done({ detail: "the upload failed (the connection broke)" }); };
    xhr.send(file);
  });

  function list(title, items, cls) {
    var d = Hermes.el("details", { "data-list": cls });
    d.appendChild(Hermes.el("summary", {}, title + " (" + items.length + ")"));
    var ul = Hermes.el("ul", { class: "paths" });
    items.forEach(function (p) {
      if (typeof p === "string") ul.appendChild(Hermes.el("li", {}, p));
      else ul.appendChild(Hermes.el("li", {}, p.path + " — " + p.why));
    });
    d.appendChild(ul);
    if (items.length && items.length <= 20 && cls !== "unchanged") d.open = true;
    return d;
  }

  function showPlan(name) {
    if (working) return;
    shown = null;
    planBox.hidden = false;
    planTitle.textContent = "Restore " + name;
    planSummary.textContent = "Planning (verifying the archive)…";
    planSchema.textContent = "";
    planRestarts.textContent = "";
    forceLine.hidden = true;
    force.checked = false;
    restoreStatus.textContent = "";
    restoreStatus.className = "";
    while (planLists.firstChild) planLists.removeChild(planLists.firstChild);
    inline(planError, null);
    confirmButton.hidden = true;
    busy(true);
    Hermes.api("POST", "api/backups/" + encodeURIComponent(name) + "/plan").then(function (p) {
      busy(false);
      var c = p.counts;
      planSummary.textContent = "Dry run: " + c.added + " added, " + c.replaced + " replaced, " + c.unchanged + " unchanged; " +
        c.kept + " kept (on the volume, not in the archive), " + c.skipped + " skipped." +
        (p.manifest ? " Made " + when(p.manifest.created) + " by " + p.manifest.build + "." : " An archive of the original's (no manifest).");
      var s = p.schema;
      if (s.refused) {
        planSchema.textContent = "Refused unless forced: " + s.refused + (s.hint ? " — " + s.hint : "");
        planSchema.className = "error";
        forceLine.hidden = false;
      } else if (s.archive) {
        planSchema.textContent = "Config schema: the archive's newest is " + s.archive.version + " (profile " + s.archive.profile + ").";
        planSchema.className = "muted";
      }
      planRestarts.textContent = p.restarts.length
        ? "The gateways serving " + p.restarts.join(", ") + " are stopped for the restore and started after."
        : "No profile changes: no gateway is stopped.";
      planLists.appendChild(list("Added", p.added, "added"));
      planLists.appendChild(list("Replaced", p.replaced, "replaced"));
      planLists.appendChild(list("Unchanged", p.unchanged, "unchanged"));
      planLists.appendChild(list("Kept", p.kept, "kept"));
      planLists.appendChild(list("Skipped", p.skipped, "skipped"));
      shown = { name: name, token: p.token, refused: !!s.refused };
      confirmButton.hidden = false;
      confirmButton.disabled = shown.refused;
      var n = c.added + c.replaced;
      confirmButton.textContent = "Restore " + n + (n === 1 ? " file" : " files");
      confirmButton.focus();
    }, function (err) {
      busy(false);
      planSummary.textContent = "";
      inline(planError, err);
    });
  }

  confirmButton.addEventListener("click", function () {
    if (!shown || working) return;
    var plan = shown;
    inline(planError, null);
    busy(true);
    restoreStatus.className = "running";
    restoreStatus.textContent = "Restoring…";
    Hermes.api("POST", "api/backups/" + encodeURIComponent(plan.name) + "/restore", { token: plan.token, force: force.checked }).then(function (r) {
      var a = r.applied;
      restoreStatus.className = "done";
      restoreStatus.textContent = "Restored: " + a.added + " added, " + a.replaced + " replaced, " + a.unchanged + " unchanged, " + a.kept + " kept." +
        (r.restarted.length ? " Restarted: " + r.restarted.join(", ") + "." : "");
      if (r.start_failures.length) {
        inline(planError, { detail: r.start_failures.map(function (f) { return f.service + " did not start again: " + f.why; }).join("; "), hint: "start it from the Overview" });
      }
      confirmButton.hidden = true;
      forceLine.hidden = true;
      shown = null;
    }, function (err) {
      restoreStatus.className = "";
      restoreStatus.textContent = "";
      inline(planError, err);
    }).then(function () { busy(false); refresh(); });
  });

  force.addEventListener("change", function () { busy(working); });

  cancelButton.addEventListener("click", function () {
    shown = null;
    planBox.hidden = true;
  });

  refresh();
})();
