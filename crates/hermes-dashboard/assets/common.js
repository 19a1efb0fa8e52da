// Shared by every page: the session token (sent on every POST: the CSRF check), a JSON
// request helper that turns an error answer into {detail, hint}, and small DOM helpers.
// No framework, no external resource.
"use strict";
var Hermes = (function () {
  var token = document.querySelector('meta[name="hermes-token"]').content;

  // fetch() a path relative to the dashboard's base; resolves to the parsed JSON body, or
  // rejects with {status, detail, hint}.
  function api(method, path, body) {
    var init = { method: method, headers: {}, credentials: "same-origin" };
    if (method !== "GET") init.headers["X-Hermes-Session-Token"] = token;
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    return fetch(path, init).then(function (r) {
      return r.text().then(function (text) {
        var json = null;
        try { json = text ? JSON.parse(text) : null; } catch (e) { json = null; }
        if (r.ok) return json;
        throw { status: r.status, detail: (json && json.detail) || text || r.statusText, hint: json && json.hint };
      });
    });
  }

  // An element with attributes and text (never HTML: text goes in as text).
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "class") e.className = attrs[k];
      else if (k.slice(0, 5) === "data-") e.dataset[k.slice(5)] = attrs[k];
      else e.setAttribute(k, attrs[k]);
    });
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  var banner = document.getElementById("banner");
  // Shows an error (or clears it with null) in the page's banner.
  function problem(err) {
    if (!err) { banner.hidden = true; banner.textContent = ""; return; }
    banner.hidden = false;
    banner.textContent = (err.detail || String(err)) + (err.hint ? " — " + err.hint : "");
  }

  // select#profile follows ?profile= (docs/dashboard.md, "Pages").
  var picker = document.getElementById("profile"), q = new URLSearchParams(location.search);
  if (picker && picker.tagName === "SELECT") {
    if ([].some.call(picker.options, function (o) { return o.value === q.get("profile"); })) picker.value = q.get("profile");
    picker.addEventListener("change", function () {
      q.set("profile", picker.value);
      history.replaceState(null, "", location.pathname + "?" + q); // absolute: not against <base>
    });
  }

  return { token: token, api: api, el: el, problem: problem, live: document.getElementById("live") };
})();
