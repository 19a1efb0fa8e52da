// The profiles page (see src/pages/profiles.rs): the list, the create form, and the panel
// of one profile (profiles?name=x): SOUL.md, model settings, .env keys, delete.
"use strict";
(function () {
  var el = Hermes.el;
  var current = new URLSearchParams(location.search).get("name");

  function byId(id) { return document.getElementById(id); }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  function path(name) { return "api/profiles/" + encodeURIComponent(name); }
  function say(node, err) {
    node.textContent = err.detail + (err.hint ? " — " + err.hint : "");
    node.className = "error";
  }
  function ok(node, text) { node.textContent = text; node.className = "muted"; }

  // ---- the list and the create form ----
  function loadList() {
    return Hermes.api("GET", "api/profiles").then(function (data) {
      Hermes.problem(null);
      var body = document.querySelector("#profiles tbody");
      clear(body);
      var clone = byId("create-clone");
      var chosen = clone.value;
      while (clone.options.length > 1) clone.remove(1);
      data.profiles.forEach(function (p) {
        var row = el("tr", { "data-profile": p.name });
        var link = el("a", { href: "profiles?name=" + encodeURIComponent(p.name) }, p.name);
        var cell = el("td");
        cell.appendChild(link);
        if (p["default"]) cell.appendChild(el("span", { "class": "muted" }, " (default)"));
        row.appendChild(cell);
        row.appendChild(el("td", {}, p.active ? "active" : ""));
        var gateway = p.gateway === null ? "—" : (p.gateway || "not registered");
        row.appendChild(el("td", { "class": "state-" + gateway }, gateway));
        row.appendChild(el("td", {}, p.config_error ? "config error: " + p.config_error : (p.model || "—")));
        row.appendChild(el("td", {}, p.description || ""));
        body.appendChild(row);
        clone.appendChild(el("option", { value: p.name }, p.name));
      });
      clone.value = chosen;
      var sup = data.supervisor;
      byId("profiles-supervisor").textContent = sup.reachable
        ? "Gateway states as the supervisor reports them."
        : "Gateway states unknown: " + sup.error + (sup.hint ? " — " + sup.hint : "");
    }).catch(Hermes.problem);
  }

  byId("create-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var result = byId("create-result");
    var name = byId("create-name").value.trim();
    var from = byId("create-clone").value;
    var body = { name: name };
    if (from) body.clone_from = from;
    Hermes.api("POST", "api/profiles", body).then(function (r) {
      ok(result, "Created `" + r.name + "`" + (r.cloned_from ? " from `" + r.cloned_from + "`" : "") + ". " + r.supervisor);
      byId("create-name").value = "";
      return loadList();
    }).catch(function (err) { say(result, err); });
  });

  // ---- one profile ----
  function loadPanel(name) {
    return Hermes.api("GET", path(name)).then(function (p) {
      byId("profile-panel").hidden = false;
      byId("panel-title").textContent = "Profile " + p.name + (p["default"] ? " (default)" : "");
      byId("panel-path").textContent = p.dir + " — gateway service " + p.service;
      showSoul(p);
      showModel(p);
      showEnv(p.name, p.env);
      showDelete(p);
    }).catch(Hermes.problem);
  }

  function showSoul(p) {
    var unreadable = p.soul.text === null;
    byId("soul-text").value = unreadable ? "" : p.soul.text;
    byId("soul-text").disabled = unreadable;
    byId("soul-save").disabled = unreadable;
    if (unreadable) say(byId("soul-limit"), { detail: p.soul.error, hint: p.soul.hint });
    else soulLimit(p.soul.chars, p.soul.gateway_chars, p.soul.max_bytes);
  }

  function soulLimit(chars, gatewayChars, maxBytes) {
    var text = "The gateway sends at most " + gatewayChars + " characters of SOUL.md (this file: " +
      chars + ")" + (chars > gatewayChars ? ": it keeps the first 70 % and last 20 % of that, cut around a marker" : "") +
      ". The page saves at most " + Math.round(maxBytes / 1024) + " KiB.";
    byId("soul-limit").textContent = text;
  }

  byId("soul-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var result = byId("soul-result");
    Hermes.api("PUT", path(current) + "/soul", { text: byId("soul-text").value }).then(function (r) {
      ok(result, "Saved (" + r.chars + " characters).");
      soulLimit(r.chars, r.gateway_chars, 1 << 20);
    }).catch(function (err) { say(result, err); });
  });

  function showModel(p) {
    var m = p.model;
    var list = byId("providers");
    clear(list);
    p.providers.forEach(function (n) { list.appendChild(el("option", { value: n })); });
    byId("model-default").value = m.default || "";
    byId("model-provider").value = m.provider || "";
    byId("model-base-url").value = m.base_url || "";
    clear(byId("model-errors"));
    if (m.error) say(byId("model-check"), { detail: m.error, hint: m.hint });
    else showCheck(p.gateway_check, null);
  }

  function showCheck(check, written) {
    var node = byId("model-check");
    var prefix = written === null ? "" : (written ? "Saved. " : "Nothing changed. ");
    if (check.ok) {
      ok(node, prefix + "The gateway accepts these settings" + (check.endpoint ? ": " + check.endpoint : " (no model configured)") +
        ". A running gateway uses them from its next request.");
    } else {
      say(node, { detail: prefix + "The gateway would refuse these settings: " + check.detail +
        " (a running gateway keeps its previous ones)", hint: check.hint });
    }
  }

  byId("model-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var errors = byId("model-errors");
    clear(errors);
    var body = {
      "default": byId("model-default").value,
      provider: byId("model-provider").value,
      base_url: byId("model-base-url").value
    };
    Hermes.api("PUT", path(current) + "/model", body).then(function (r) {
      byId("model-provider").value = r.model.provider || "";
      showCheck(r.gateway_check, r.written);
    }).catch(function (err) {
      // The answer's `detail` lists every refused field; nothing was written.
      errors.appendChild(el("li", {}, err.detail + (err.hint ? " — " + err.hint : "")));
    });
  });

  function showEnv(name, env) {
    var body = document.querySelector("#env tbody");
    clear(body);
    env.keys.forEach(function (k) {
      var row = el("tr", { "data-key": k.key });
      row.appendChild(el("td", {}, k.key));
      var value = el("td");
      var code = el("code", {}, k.empty ? "(empty)" : k.masked);
      value.appendChild(code);
      row.appendChild(value);
      var actions = el("td");
      var reveal = el("button", { type: "button", "data-action": "reveal" }, "Reveal");
      reveal.addEventListener("click", function () {
        if (reveal.textContent === "Hide") {
          code.textContent = k.empty ? "(empty)" : k.masked;
          reveal.textContent = "Reveal";
          return;
        }
        Hermes.api("POST", path(name) + "/env/" + encodeURIComponent(k.key) + "/reveal").then(function (r) {
          code.textContent = r.value;
          reveal.textContent = "Hide";
        }).catch(Hermes.problem);
      });
      var unset = el("button", { type: "button", "data-action": "unset" }, "Unset");
      unset.addEventListener("click", function () {
        if (!window.confirm("Remove " + k.key + " from this profile's .env?")) return;
        Hermes.api("DELETE", path(name) + "/env/" + encodeURIComponent(k.key)).then(function (r) {
          showEnv(name, r.env);
        }).catch(Hermes.problem);
      });
      // Only a secret is masked, so only a secret has anything to reveal.
      if (k.secret) actions.appendChild(reveal);
      actions.appendChild(unset);
      row.appendChild(actions);
      body.appendChild(row);
    });
    if (env.unparsed_lines.length) {
      var note = el("tr");
      note.appendChild(el("td", { colspan: "3", "class": "muted" },
        "Lines " + env.unparsed_lines.join(", ") + " are not assignments: ignored, and kept as they are."));
      body.appendChild(note);
    }
  }

  byId("env-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var body = { key: byId("env-key").value.trim(), value: byId("env-value").value };
    Hermes.api("PUT", path(current) + "/env", body).then(function (r) {
      Hermes.problem(null);
      byId("env-key").value = "";
      byId("env-value").value = "";
      showEnv(current, r.env);
    }).catch(Hermes.problem);
  });

  function showDelete(p) {
    var note = byId("delete-note");
    var button = byId("delete-button");
    var input = byId("delete-confirm");
    if (p["default"]) {
      note.textContent = "The default profile is the Hermes home itself: it cannot be deleted.";
      button.disabled = true;
      input.disabled = true;
      return;
    }
    note.textContent = "Moves the profile to profiles/.trash/ (move it back to restore). Its gateway, " +
      p.service + ", is stopped and removed from the supervisor first.";
    button.disabled = false;
    input.disabled = false;
  }

  byId("delete-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var typed = byId("delete-confirm").value.trim();
    if (typed !== current) {
      Hermes.problem({ detail: "Type the profile's name (" + current + ") to confirm the deletion." });
      return;
    }
    Hermes.api("DELETE", path(current), { confirm: typed }).then(function (r) {
      Hermes.problem(null);
      byId("profile-panel").hidden = true;
      ok(byId("create-result"), "Deleted `" + r.deleted + "`: its files are in " + r.trashed_to + ". " + r.supervisor + ".");
      current = null;
      history.replaceState(null, "", "profiles");
      return loadList();
    }).catch(Hermes.problem);
  });

  loadList();
  if (current) loadPanel(current);
})();
