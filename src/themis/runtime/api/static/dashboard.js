// The themis dashboard: asks for a token, then shows GET /v1/cluster every few seconds.
//
// Safety rules of this file (tests/runtime/test_dashboard.py checks them):
// - everything the server sends is put in the page as text (textContent, attributes set
//   one by one), never parsed as HTML: an app named "<script>" shows as those characters;
// - text is inert first (inert()): control characters and Unicode bidi controls show
//   escaped ("\x1b", "\u202e"), so "invoice_\u202egpj.exe" cannot pose as "...exe.jpg";
// - the token stays in this tab's sessionStorage and goes only into the Authorization
//   header of requests to this origin; a "#token=..." fragment is read once and removed
//   from the address bar (a fragment is never sent to the server, so it is in no log).
"use strict";

(function () {
  var REFRESH_MS = 3000;
  var KEY = "themis.token";
  var SVG = "http://www.w3.org/2000/svg";
  var COLOURS = 8; // classes c0..c7 in dashboard.css
  var timer = null;
  // Bumped whenever polling restarts or stops: an answer to an older request is dropped,
  // so a token forgotten or replaced while a request is in flight is not shown again.
  var generation = 0;

  function $(id) { return document.getElementById(id); }

  // C0 and C1 controls, DEL, bidi embeddings/overrides/isolates/marks, line separators
  // (the CLI's cli/inert.py escapes the same set).
  var CONTROLS = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]/g;

  function inert(text) {
    return String(text).replace(CONTROLS, function (c) {
      var code = c.charCodeAt(0);
      var hex = code.toString(16);
      if (code < 0x100) { return "\\x" + ("0" + hex).slice(-2); }
      return "\\u" + ("000" + hex).slice(-4);
    });
  }

  function el(tag, text, cls) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) { node.textContent = inert(text); }
    if (cls) { node.className = cls; }
    return node;
  }

  function svg(tag, attrs) {
    var node = document.createElementNS(SVG, tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, String(attrs[k])); });
    return node;
  }

  function clear(node) { while (node.firstChild) { node.removeChild(node.firstChild); } }

  function pad(n) { return n < 10 ? "0" + n : String(n); }

  function clock(wall) {
    var d = new Date(wall * 1000);
    return pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
  }

  function span(seconds) {
    seconds = Math.max(0, Math.round(seconds));
    if (seconds < 60) { return seconds + "s"; }
    var m = Math.floor(seconds / 60);
    if (m < 60) { return m + "m " + pad(seconds % 60) + "s"; }
    return Math.floor(m / 60) + "h " + pad(m % 60) + "m";
  }

  function rhoText(rho) {
    if (rho === null || rho === undefined) { return "-"; }
    if (rho >= 1000) { return "> 1000 (no progress yet)"; }
    return rho.toFixed(2);
  }

  function setState(state, message) {
    document.body.setAttribute("data-state", state);
    var notice = $("notice");
    notice.textContent = inert(message || "");
    notice.hidden = !message;
    notice.className = state === "ok" ? "" : state;
  }

  function token() {
    try { return sessionStorage.getItem(KEY); } catch (e) { return null; }
  }

  function keep(value) {
    try { sessionStorage.setItem(KEY, value); } catch (e) { /* private mode: memory only */ }
  }

  function forget() {
    try { sessionStorage.removeItem(KEY); } catch (e) { /* nothing kept */ }
  }

  function stopPolling() {
    generation += 1;
    if (timer !== null) { clearTimeout(timer); timer = null; }
  }

  function askForToken(state, message) {
    stopPolling();
    $("view").hidden = true;
    $("forget").hidden = true;
    $("login").hidden = false;
    $("arbiter").textContent = "";
    $("updated").textContent = "";
    setState(state, message);
    $("token").focus();
  }

  function colourOf(names) {
    var index = {};
    names.forEach(function (name, k) { index[name] = "c" + (k % COLOURS); });
    return function (name) { return index[name] || "other"; };
  }

  function renderArbiter(data) {
    var a = data.arbiter;
    var who = data.role === "app" ? "app token: your app only" : data.role + " token: read-only";
    var text = "arbiter " + a.state + " · " + (a.gpus || 0) + " GPUs on " + (a.machines || 0) +
      " machines · " + (a.rounds || 0) + " rounds · " + who;
    if (a.ray_error) { text += " · Ray: " + a.ray_error; }
    $("arbiter").textContent = inert(text);
    $("arbiter").className = "arbiter " + a.state;
    $("updated").textContent = "updated " + clock(data.now);
  }

  function renderMachines(data, colour) {
    var root = $("machines");
    clear(root);
    var racks = [];
    var byRack = {};
    var total = 0, busy = 0;
    data.machines.forEach(function (m) {
      if (!(m.rack in byRack)) { byRack[m.rack] = []; racks.push(m.rack); }
      byRack[m.rack].push(m);
    });
    racks.forEach(function (rack) {
      var box = el("div", null, "rack");
      box.setAttribute("data-rack", rack);
      box.appendChild(el("h3", "rack " + rack));
      byRack[rack].forEach(function (m) {
        var machine = el("div", null, "machine");
        machine.setAttribute("data-node", m.node_id);
        var title = "machine " + (m.name || m.node_id.slice(0, 8));
        if (m.address) { title += " · " + m.address; }
        if (m.gpu_type) { title += " · " + m.gpu_type; }
        title += " · " + m.gpus.length + " GPUs";
        var heading = el("h4", title);
        heading.title = "Ray node " + m.node_id;
        machine.appendChild(heading);
        var list = el("ol", null, "gpus");
        m.gpus.forEach(function (g) {
          total += 1;
          var item = el("li", null, g.draining ? "gpu draining" : "gpu");
          item.appendChild(el("span", "g" + g.slot, "slot"));
          if (g.app_id) {
            busy += 1;
            item.className += " held " + colour(g.app_id);
            item.setAttribute("data-app", g.app_id);
            item.appendChild(el("span", g.app_id + " / " + g.trial_id, "holder"));
            var until = g.draining ? "stopping: lease ended, job checkpointing" :
              (g.until === null ? "open-ended lease" :
                "until " + clock(g.until) + " (in " + span(g.until - data.now) + ")");
            item.appendChild(el("span", until, "until"));
          } else if (g.other) {
            busy += 1;
            item.className += " held other";
            item.appendChild(el("span", "another app", "holder"));
          } else {
            item.className += " free";
            item.appendChild(el("span", "free", "holder"));
          }
          list.appendChild(item);
        });
        machine.appendChild(list);
        box.appendChild(machine);
      });
      root.appendChild(box);
    });
    $("gpu-summary").textContent = total ?
      busy + " of " + total + " GPUs held, " + (total - busy) + " free" :
      "no GPU in the cluster yet";
  }

  function cells(row, values) {
    values.forEach(function (v) { row.appendChild(el("td", v)); });
  }

  function renderApps(data, colour) {
    var body = $("apps").tBodies[0];
    clear(body);
    data.apps.forEach(function (a) {
      var row = el("tr", null, "app");
      row.setAttribute("data-app", a.app_id);
      var name = el("td", a.app_id, "swatch " + colour(a.app_id));
      row.appendChild(name);
      // A tuner app: which tuner drives it (our words: kind sampler/pruner) and how
      // many trials its pruner stopped; each trial's own reason is in the events.
      cells(row, [a.tuner ? a.state + " (" + a.tuner + ")" : a.state, rhoText(a.rho),
        a.gpus, a.leases, a.pruned ? a.alive + " (" + a.pruned + " pruned)" : a.alive,
        a.steps_done + " / " + a.steps_total, a.why || ""]);
      body.appendChild(row);
    });
    if (!data.apps.length) {
      var empty = el("tr");
      var cell = el("td", "no app submitted yet", "muted");
      cell.colSpan = 8;
      empty.appendChild(cell);
      body.appendChild(empty);
    }
  }

  function renderRho(data, colour) {
    var root = $("rho-chart");
    var legend = $("rho-legend");
    clear(root);
    clear(legend);
    var names = Object.keys(data.rho).filter(function (n) { return data.rho[n].length; });
    var W = 760, H = 240, L = 44, R = 12, T = 10, B = 28;
    var chart = svg("svg", { viewBox: "0 0 " + W + " " + H, width: W, height: H,
      role: "img", "aria-label": "rho of each app over time" });
    var t0 = Infinity, t1 = data.now, top = 0;
    names.forEach(function (n) {
      data.rho[n].forEach(function (p) {
        t0 = Math.min(t0, p[0]);
        t1 = Math.max(t1, p[0]);
        top = Math.max(top, p[1]);
      });
    });
    if (!names.length) {
      root.appendChild(el("p", "no rho yet: apps get one once admitted", "muted"));
      return;
    }
    if (t1 - t0 < 10) { t0 = t1 - 10; }
    var ymax = Math.min(10, Math.max(2, Math.ceil(top * 1.1)));
    function x(t) { return L + (W - L - R) * (t - t0) / (t1 - t0); }
    function y(v) { return T + (H - T - B) * (1 - Math.min(v, ymax) / ymax); }
    for (var v = 0; v <= ymax; v += ymax > 5 ? 2 : 1) {
      chart.appendChild(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), "class": "grid" }));
      var label = svg("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" });
      label.textContent = String(v);
      chart.appendChild(label);
    }
    chart.appendChild(svg("line", { x1: L, x2: W - R, y1: y(1), y2: y(1), "class": "fair" }));
    for (var k = 0; k <= 4; k += 1) {
      var t = t0 + (t1 - t0) * k / 4;
      var tick = svg("text", { x: x(t), y: H - 8, "text-anchor": k === 0 ? "start" :
        (k === 4 ? "end" : "middle") });
      tick.textContent = clock(t);
      chart.appendChild(tick);
    }
    names.forEach(function (n) {
      var points = data.rho[n].map(function (p) {
        return x(p[0]).toFixed(1) + "," + y(p[1]).toFixed(1);
      });
      if (points.length === 1) { points.push(points[0]); }
      var line = svg("polyline", { points: points.join(" "), "class": "line " + colour(n) });
      line.setAttribute("data-app", n);
      chart.appendChild(line);
      var last = data.rho[n][data.rho[n].length - 1][1];
      var item = el("li", null, colour(n));
      item.setAttribute("data-app", n);
      item.appendChild(el("span", "", "key"));
      item.appendChild(el("span", n + ": " + rhoText(last)));
      legend.appendChild(item);
    });
    root.appendChild(chart);
  }

  function renderQueued(data) {
    var body = $("queued").tBodies[0];
    clear(body);
    data.queued.forEach(function (q) {
      var row = el("tr", null, "queued");
      row.setAttribute("data-app", q.app_id);
      cells(row, [q.app_id, q.trial_id, q.state, q.gpus, q.steps_done + " / " + q.steps_total]);
      body.appendChild(row);
    });
    var shown = data.queued.length;
    $("queued-summary").textContent = data.queued_total === 0 ? "nothing waits for GPUs" :
      data.queued_total + " trials wait" +
      (shown < data.queued_total ? " (the first " + shown + " shown)" : "");
  }

  function renderEvents(data) {
    var body = $("events").tBodies[0];
    clear(body);
    data.events.forEach(function (e) {
      var row = el("tr", null, "event");
      row.setAttribute("data-app", e.app_id);
      cells(row, [clock(e.wall), e.app_id, e.trial_id || "", e.message]);
      body.appendChild(row);
    });
  }

  function render(data) {
    var names = data.apps.map(function (a) { return a.app_id; });
    var colour = colourOf(names);
    renderArbiter(data);
    renderMachines(data, colour);
    renderApps(data, colour);
    renderRho(data, colour);
    renderQueued(data);
    renderEvents(data);
    $("login").hidden = true;
    $("view").hidden = false;
    $("forget").hidden = false;
    setState("ok", data.arbiter.state === "alive" ? "" :
      "the arbiter is " + data.arbiter.state + " (its last tick " + span(data.arbiter.age) +
      " ago)");
  }

  function refresh() {
    timer = null;
    var mine = generation;
    var value = token();
    if (!value) {
      askForToken("no-token", "A token is needed to see the cluster: enter the operator's " +
        "admin or submit token, or an app's token.");
      return;
    }
    fetch("v1/cluster", {
      headers: { "Authorization": "Bearer " + value, "Accept": "application/json" },
      cache: "no-store",
      credentials: "omit",
      referrerPolicy: "no-referrer",
    }).then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (body) {
        if (mine !== generation) { return; }
        if (response.status === 401 || response.status === 403) {
          forget();
          askForToken("refused", "Refused (" + response.status + "): " +
            (body.detail || "this token may not see the cluster") + ". Enter a valid token.");
          return;
        }
        if (!response.ok) {
          throw new Error("HTTP " + response.status + ": " + (body.detail || "no detail"));
        }
        render(body);
        timer = setTimeout(refresh, REFRESH_MS);
      });
    }).catch(function (err) {
      if (mine !== generation) { return; }
      setState("unreachable", "The arbiter does not answer (" + err.message + "); trying " +
        "again every " + REFRESH_MS / 1000 + " s.");
      timer = setTimeout(refresh, REFRESH_MS);
    });
  }

  // A "#token=..." fragment: kept in the tab, then removed from the address bar. Returns
  // whether there was one.
  function tokenFromFragment() {
    var hash = window.location.hash;
    if (hash.indexOf("#token=") !== 0) { return false; }
    var given = hash.slice("#token=".length);
    try { given = decodeURIComponent(given); } catch (e) { /* kept as written */ }
    keep(given);
    history.replaceState(null, "", window.location.pathname + window.location.search);
    return true;
  }

  function start() {
    tokenFromFragment();
    window.addEventListener("hashchange", function () {
      // The same page given a token in its address bar: no reload happens, so read it here.
      if (tokenFromFragment()) {
        stopPolling();
        setState("loading", "");
        refresh();
      }
    });
    $("login").addEventListener("submit", function (event) {
      event.preventDefault();
      var value = $("token").value.trim();
      $("token").value = "";
      if (!value) { return; }
      keep(value);
      stopPolling();
      setState("loading", "");
      refresh();
    });
    $("forget").addEventListener("click", function () {
      forget();
      askForToken("no-token", "The token was forgotten; enter one to see the cluster again.");
    });
    refresh();
  }

  start();
}());
