// The Config page (see src/pages/config.rs): a profile's settings form, its whole config.yaml
// as text (saved against the version it was loaded from), and the restart a save needs.
"use strict";
(function () {
  var el = Hermes.el;
  var profile = document.getElementById("profile");
  var loaded = { version: null, text: "", fields: [] };
  // Fields chosen from a list; the rest are text. "" is "not set: the default".
  var CHOICES = { engine: ["", "native", "agent"], multiplex: ["", "true", "false"], api_server: ["", "true", "false"] };

  function byId(id) { return document.getElementById(id); }
  function q() { return "?profile=" + encodeURIComponent(profile.value); }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  function say(node, text, bad) { node.textContent = text; node.className = bad ? "error" : "muted"; }
  function words(err) { return err.detail + (err.hint ? " — " + err.hint : ""); }

  function input(f) {
    var box;
    if (CHOICES[f.name]) {
      box = el("select", { name: f.name, id: "field-" + f.name });
      CHOICES[f.name].forEach(function (v) { box.appendChild(el("option", { value: v }, v || "(default)")); });
    } else {
      box = el("input", { name: f.name, id: "field-" + f.name, autocomplete: "off" });
    }
    box.value = f.value;
    box.disabled = !f.editable;
    return box;
  }

  function showSettings(view) {
    loaded.fields = view.fields;
    var body = document.querySelector("#settings tbody");
    clear(body);
    view.fields.forEach(function (f) {
      var row = el("tr", { "data-field": f.name });
      var name = el("td", {}, f.label);
      name.appendChild(el("div", { "class": "muted" }, f.key + (f.note ? " — " + f.note : "")));
      row.appendChild(name);
      row.appendChild(el("td", {}, f.value || "—"));
      row.appendChild(el("td", {}, f.effective || "—"));
      var from = el("td", {}, f.source);
      if (f.restart) from.appendChild(el("div", { "class": "muted restart-flag" }, "a change needs a restart"));
      row.appendChild(from);
      var cell = el("td");
      cell.appendChild(input(f));
      row.appendChild(cell);
      body.appendChild(row);
    });
  }

  function showText(data) {
    loaded.version = data.version;
    loaded.text = data.yaml;
    byId("text").value = data.yaml;
    byId("path").textContent = data.path;
    byId("text-reload").hidden = true;
  }

  function load() {
    Hermes.problem(null);
    clear(byId("settings-errors"));
    return Promise.all([
      Hermes.api("GET", "api/config/raw" + q()).then(showText),
      Hermes.api("GET", "api/config/settings" + q()).then(showSettings, function (err) {
        clear(document.querySelector("#settings tbody"));
        say(byId("settings-result"), "The form is unavailable: " + words(err), true);
      }),
    ]).catch(Hermes.problem);
  }

  // After a save: the restart it needs, offered with what the restart will be like. A save
  // that needs none leaves an earlier one's offer in place (that change still waits for it).
  function showRestart(restart) {
    var box = byId("restart");
    if (!restart || !restart.needed) return "";
    box.hidden = false;
    box.dataset.service = restart.service;
    byId("restart-button").disabled = false;
    say(byId("restart-note"), "Needs a restart of " + restart.service + " to apply (" + restart.changed.join(", ") + "). " +
      (restart.uninterrupted ? "The restart is uninterrupted: " : "The restart interrupts service: ") + restart.why + ".");
    return " Needs a restart.";
  }

  byId("settings-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var result = byId("settings-result");
    var errors = byId("settings-errors");
    clear(errors);
    var changed = {};
    loaded.fields.forEach(function (f) {
      var box = byId("field-" + f.name);
      if (f.editable && box && box.value.trim() !== f.value) changed[f.name] = box.value;
    });
    if (!Object.keys(changed).length) { say(result, "Nothing changed.", false); return; }
    Hermes.api("PUT", "api/config/settings" + q(), { settings: changed }).then(function (r) {
      var note = showRestart(r.restart);
      showSettings(r.settings);
      var done = (r.written ? "Saved." : "Already so: nothing written.") + (note || " Applies without a restart.");
      // Unsaved edits in the text are never replaced: saving them is then a conflict.
      if (byId("text").value !== loaded.text) {
        say(result, done + " The text below has unsaved edits and no longer matches the file.", false);
        return;
      }
      return Hermes.api("GET", "api/config/raw" + q()).then(function (data) {
        showText(data);
        say(result, done, false);
      });
    }).catch(function (err) {
      say(result, "Not saved.", true);
      // The detail lists "field: reason" for each refused field.
      String(err.detail).split("; ").forEach(function (line) { errors.appendChild(el("li", {}, line)); });
      if (err.hint) errors.appendChild(el("li", { "class": "muted" }, err.hint));
    });
  });

  byId("text-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var result = byId("text-result");
    var text = byId("text");
    Hermes.api("PUT", "api/config/raw" + q(), { yaml_text: text.value, version: loaded.version }).then(function (r) {
      loaded.version = r.version;
      loaded.text = text.value;
      var note = showRestart(r.restart);
      say(result, (r.written ? "Saved." : "Already so: nothing written.") + note, false);
      return Hermes.api("GET", "api/config/settings" + q()).then(showSettings);
    }).catch(function (err) {
      var at = /line (\d+), column (\d+)/.exec(err.detail || "");
      if (err.status === 409) {
        byId("text-reload").hidden = false;
        say(result, "Conflict: " + words(err) + " (your text is still here: copy it before reloading).", true);
      } else if (at) {
        say(result, "Error at " + at[1] + ":" + at[2] + " — " + words(err), true);
        var lines = text.value.split("\n");
        var offset = 0;
        for (var i = 0; i < Number(at[1]) - 1 && i < lines.length; i++) offset += lines[i].length + 1;
        offset += Math.max(0, Number(at[2]) - 1);
        text.focus();
        text.setSelectionRange(offset, offset);
      } else {
        say(result, "Not saved: " + words(err), true);
      }
    });
  });

  byId("text-reload").addEventListener("click", function () { load(); say(byId("text-result"), "Reloaded.", false); });

  byId("restart-button").addEventListener("click", function () {
    var service = byId("restart").dataset.service;
    var note = byId("restart-note");
    byId("restart-button").disabled = true;
    Hermes.api("POST", "api/services/" + encodeURIComponent(service) + "/restart").then(function () {
      say(note, "Restarted " + service + ".", false);
    }).catch(function (err) {
      byId("restart-button").disabled = false;
      say(note, "Restart failed: " + words(err), true);
    });
  });

  profile.addEventListener("change", function () {
    byId("restart").hidden = true;
    say(byId("settings-result"), "", false);
    say(byId("text-result"), "", false);
    load();
  });
  load();
})();
