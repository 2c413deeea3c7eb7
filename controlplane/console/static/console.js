// The console's script: it applies the live stream's changes (replace,
// remove, log) and advances elapsed times, countdowns and heartbeat ages
// every second from their data attributes, with no server traffic. No
// framework, no inline handlers (the console's CSP allows none).
(function () {
  "use strict";

  // compact renders a duration in ms as the terminal does: 41s, 2m03s, 1h02m.
  function compact(ms) {
    var s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) return s + "s";
    var m = Math.floor(s / 60);
    if (m < 60) return m + "m" + String(s % 60).padStart(2, "0") + "s";
    return Math.floor(m / 60) + "h" + String(m % 60).padStart(2, "0") + "m";
  }

  function tick() {
    var now = Date.now();
    document.querySelectorAll("[data-started]").forEach(function (el) {
      var t = Date.parse(el.getAttribute("data-started"));
      if (!isNaN(t)) el.textContent = compact(now - t);
    });
    document.querySelectorAll("[data-not-before]").forEach(function (el) {
      var t = Date.parse(el.getAttribute("data-not-before"));
      if (isNaN(t)) return;
      el.textContent = t > now ? "retry in " + compact(t - now + 999) : "retry starting";
    });
    document.querySelectorAll(".heartbeat[data-since]").forEach(function (el) {
      var t = Date.parse(el.getAttribute("data-since"));
      if (!isNaN(t)) el.textContent = compact(now - t) + " ago";
    });
  }

  function fragment(html) {
    var tpl = document.createElement("template");
    tpl.innerHTML = html.trim();
    return tpl.content.firstElementChild;
  }

  function replace(msg) {
    var el = fragment(msg.html);
    if (!el) return;
    var old = document.getElementById(msg.id);
    if (old) {
      old.replaceWith(el);
      return;
    }
    var box = (msg.into && document.getElementById(msg.into)) || document.querySelector("[data-container]");
    if (!box) return;
    box.appendChild(el);
    var empty = document.getElementById(box.id + "-empty");
    if (empty) empty.remove();
  }

  // order moves the container's elements into the order of msg.ids.
  function order(msg) {
    var box = document.getElementById(msg.into);
    if (!box || !msg.ids) return;
    msg.ids.forEach(function (id) {
      var el = document.getElementById(id);
      if (el && el.parentNode === box) box.appendChild(el);
    });
  }

  function remove(msg) {
    var el = document.getElementById(msg.id);
    if (el) el.remove();
  }

  var maxLog = 400000; // characters of log the page keeps

  function log(msg) {
    var pre = document.getElementById("log");
    if (!pre) return;
    var atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    pre.appendChild(document.createTextNode(msg.lines));
    // Keep the tail: a long run's log would otherwise grow without end.
    if (pre.textContent.length > maxLog) {
      var text = pre.textContent.slice(-maxLog / 2);
      pre.textContent = text.slice(text.indexOf("\n") + 1);
    }
    if (atEnd) pre.scrollTop = pre.scrollHeight;
  }

  function handler(fn) {
    return function (ev) {
      try {
        fn(JSON.parse(ev.data));
      } catch (e) {
        if (window.console) window.console.error("console stream:", e);
      }
      tick();
    };
  }

  function connect() {
    var url = document.body.getAttribute("data-stream");
    if (!url || !window.EventSource) return;
    var src = new EventSource(url);
    src.addEventListener("replace", handler(replace));
    src.addEventListener("remove", handler(remove));
    src.addEventListener("order", handler(order));
    src.addEventListener("log", handler(log));
    document.body.setAttribute("data-live", "connecting");
    src.addEventListener("open", function () {
      document.body.setAttribute("data-live", "open");
    });
    src.addEventListener("error", function () {
      // EventSource reconnects by itself; a 401 (signed out) closes it.
      document.body.setAttribute("data-live", src.readyState === EventSource.CLOSED ? "closed" : "connecting");
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    tick();
    setInterval(tick, 1000);
    connect();
    var pre = document.getElementById("log");
    if (pre) pre.scrollTop = pre.scrollHeight;
  });
})();
