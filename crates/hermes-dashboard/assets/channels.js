// The Channels page (see src/pages/channels.rs): the agent's messaging platforms in a profile,
// whether each is enabled, has its credentials and is connected; set or clear a platform's
// variables, enable or disable it, and restart the gateway to apply. Values typed are sent
// once and never shown back; stored text goes into the page as text, never as HTML.
"use strict";
(function () {
  var el = Hermes.el;
  var byId = function (id) { return document.getElementById(id); };
  var profile = byId("profile");
  var rows = document.querySelector("#platforms tbody");
  var editing = null;
  var service = "";

  function q() { return "?profile=" + encodeURIComponent(profile.value); }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  function credentials(p) {
    var required = p.env_vars.filter(function (v) { return v.required; });
    var set = required.filter(function (v) { return v.is_set; });
    if (!required.length) return "none needed";
    return set.length === required.length ? "present" : "missing " + (required.length - set.length) + " of " + required.length;
  }

  function row(p) {
    var tr = el("tr", { "data-id": p.id, "data-state": p.state });
    var name = el("td", {}, p.name);
    if (p.description) name.appendChild(el("div", { class: "muted" }, p.description));
    tr.appendChild(name);
    tr.appendChild(el("td", { class: "enabled" }, p.enabled ? "yes" : "no"));
    tr.appendChild(el("td", { class: "credentials" }, credentials(p)));
    tr.appendChild(el("td", { class: "state" }, p.state.replace(/_/g, " ")));
    tr.appendChild(el("td", { class: p.error_message ? "error" : "" }, p.error_message || "—"));
    var cell = el("td");
    var edit = el("button", { type: "button", "data-action": "edit" }, "Set up");
    edit.addEventListener("click", function () { open(p); });
    cell.appendChild(edit);
    tr.appendChild(cell);
    return tr;
  }

  function open(p) {
    editing = p;
    byId("edit").hidden = false;
    byId("edit-name").textContent = p.name;
    byId("edit-description").textContent = p.description + (p.docs_url ? " Setup: " + p.docs_url : "");
    byId("edit-enabled").checked = p.enabled;
    var box = byId("edit-vars");
    clear(box);
    p.env_vars.forEach(function (v) {
      var input = el("input", { type: v.is_password ? "password" : "text", name: v.key, autocomplete: "off",
        placeholder: v.is_set ? "set (hidden): type to replace" : (v.required ? "required" : "optional") });
      var label = el("label", { class: "field" }, v.prompt + " (" + v.key + ")");
      label.appendChild(input);
      if (v.is_set) {
        var drop = el("label", { class: "check" }, " clear");
        drop.insertBefore(el("input", { type: "checkbox", "data-clear": v.key }), drop.firstChild);
        label.appendChild(drop);
      }
      if (v.description) label.appendChild(el("div", { class: "muted" }, v.description));
      box.appendChild(label);
    });
    byId("edit").scrollIntoView();
  }

  byId("edit-cancel").addEventListener("click", function () { byId("edit").hidden = true; editing = null; });
  byId("edit-form").addEventListener("submit", function (e) {
    e.preventDefault();
    if (!editing) return;
    var env = {}, clearEnv = [];
    byId("edit-vars").querySelectorAll("input[name]").forEach(function (i) { if (i.value.trim()) env[i.name] = i.value; });
    byId("edit-vars").querySelectorAll("input[data-clear]").forEach(function (c) { if (c.checked) clearEnv.push(c.dataset.clear); });
    var body = { env: env, clear_env: clearEnv, enabled: byId("edit-enabled").checked };
    Hermes.api("PUT", "api/messaging/platforms/" + encodeURIComponent(editing.id) + q(), body).then(function (r) {
      Hermes.problem(null);
      byId("edit").hidden = true;
      editing = null;
      if (r.restart && r.restart.needed) {
        service = r.restart.service;
        byId("restart").hidden = false;
        byId("restart-button").disabled = false;
        byId("restart-note").textContent = "Saved. A restart of " + service + " applies it: " + r.restart.why + ".";
      }
      return load();
    }, Hermes.problem);
  });

  byId("restart-button").addEventListener("click", function () {
    byId("restart-button").disabled = true;
    Hermes.api("POST", "api/services/" + encodeURIComponent(service) + "/restart").then(function () {
      byId("restart-note").textContent = service + " restarted.";
      return load();
    }, function (err) { byId("restart-button").disabled = false; Hermes.problem(err); });
  });

  function load() {
    return Hermes.api("GET", "api/messaging/platforms" + q()).then(function (r) {
      Hermes.problem(null);
      byId("env-path").textContent = r.env_path;
      var on = r.platforms.filter(function (p) { return p.enabled; }).length;
      byId("summary").textContent = r.platforms.length + " platforms supported by the installed agent, " + on + " enabled." +
        (r.engine === "agent" ? "" : " This profile's engine is " + r.engine + ": platforms run only in the agent engine's gateway.");
      clear(rows);
      r.platforms.forEach(function (p) { rows.appendChild(row(p)); });
    }).catch(function (err) { clear(rows); byId("summary").textContent = ""; Hermes.problem(err); });
  }

  // Pairing: the agent's own store reads and changes it (src/pages/channels/pairing.rs).
  function user(entry) { return entry.user_name ? entry.user_name + " (" + entry.user_id + ")" : entry.user_id; }
  function pairingCall(path, body) {
    return Hermes.api("POST", "api/pairing/" + path + q(), body).then(function () {
      Hermes.problem(null);
      return loadPairing().then(function () { return true; });
    }, function (err) { Hermes.problem(err); return false; });
  }
  function loadPairing() {
    return Hermes.api("GET", "api/pairing" + q()).then(function (r) {
      var pending = document.querySelector("#pending tbody"), approved = document.querySelector("#approved tbody");
      clear(pending); clear(approved);
      r.pending.forEach(function (p) {
        var tr = el("tr", { "data-user": p.user_id });
        tr.appendChild(el("td", {}, p.platform));
        tr.appendChild(el("td", {}, user(p)));
        tr.appendChild(el("td", {}, p.age_minutes + " min ago"));
        var cell = el("td");
        if (p.request_id) {
          var b = el("button", { type: "button", "data-action": "approve" }, "Approve");
          b.addEventListener("click", function () { pairingCall("approve", { platform: p.platform, request_id: p.request_id }); });
          cell.appendChild(b);
        } else {
          cell.appendChild(el("span", { class: "muted" }, "approve with the code the user got"));
        }
        tr.appendChild(cell);
        pending.appendChild(tr);
      });
      r.approved.forEach(function (a) {
        var tr = el("tr", { "data-user": a.user_id });
        tr.appendChild(el("td", {}, a.platform));
        tr.appendChild(el("td", {}, user(a)));
        tr.appendChild(el("td", {}, a.approved_at ? new Date(a.approved_at * 1000).toLocaleString() : "—"));
        var b = el("button", { type: "button", "data-action": "revoke" }, "Revoke");
        b.addEventListener("click", function () { pairingCall("revoke", { platform: a.platform, user_id: a.user_id }); });
        var cell = el("td"); cell.appendChild(b); tr.appendChild(cell);
        approved.appendChild(tr);
      });
      byId("pending").hidden = !r.pending.length;
      byId("approved").hidden = !r.approved.length;
      byId("pairing-summary").textContent = r.pending.length + " waiting for approval, " + r.approved.length + " approved." +
        (r.by_request_id ? "" : " This agent approves by the code the user got from the bot.");
    }, function () { byId("pairing-summary").textContent = ""; });
  }
  byId("approve-code").addEventListener("submit", function (e) {
    e.preventDefault();
    pairingCall("approve", { platform: byId("code-platform").value, code: byId("code-value").value }).then(function (done) {
      if (done) byId("code-value").value = "";
    });
  });
  byId("clear-pending").addEventListener("click", function () { pairingCall("clear-pending", {}); });

  profile.addEventListener("change", function () { byId("edit").hidden = true; load(); loadPairing(); });
  load();
  loadPairing();
  // The gateway's word on each platform changes while the page is open: asked again every 30 s.
  setInterval(function () { if (!editing) { load(); loadPairing(); } }, 30000);
})();
