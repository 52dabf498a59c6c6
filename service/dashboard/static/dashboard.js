// IntelliPerf dashboard: refresh a page's live part without a reload, and follow a job's log.
// Served as a file (the Content-Security-Policy allows no inline script). Text from the server is
// inserted with textContent; HTML fragments come from the server's autoescaped templates.
"use strict";

(function () {
  const MAX_LOG_LINES = 5000;
  const FINISHED = ["succeeded", "failed", "cancelled"];

  function setState(text, bad) {
    const el = document.getElementById("refresh-state");
    if (el) {
      el.textContent = text;
      el.classList.toggle("bad", Boolean(bad));
    }
  }

  function selectionInside(el) {
    const sel = window.getSelection();
    return sel && !sel.isCollapsed && sel.rangeCount > 0 && el.contains(sel.getRangeAt(0).commonAncestorContainer);
  }

  // Replace the live part, keeping what the reader has done: horizontal scroll of tables, opened details.
  function swap(live, html) {
    const scrolls = Array.from(live.querySelectorAll(".scroll, pre")).map((el) => [el.scrollLeft, el.scrollTop]);
    const details = Array.from(live.querySelectorAll("details")).map((el) => el.open);
    live.innerHTML = html;
    live.querySelectorAll(".scroll, pre").forEach((el, i) => {
      if (scrolls[i]) {
        el.scrollLeft = scrolls[i][0];
        el.scrollTop = scrolls[i][1];
      }
    });
    live.querySelectorAll("details").forEach((el, i) => {
      if (i < details.length) el.open = details[i];
    });
  }

  async function refresh(live) {
    if (selectionInside(live)) return true; // do not pull text from under the reader's selection
    let response;
    try {
      response = await fetch(live.dataset.refresh, { credentials: "same-origin", cache: "no-store" });
    } catch (err) {
      setState("connection lost, retrying", true);
      return true;
    }
    if (response.redirected && new URL(response.url).pathname === "/login") {
      window.location.assign("/login?next=" + encodeURIComponent(location.pathname + location.search));
      return false;
    }
    if (!response.ok) {
      setState("refresh failed (HTTP " + response.status + "), retrying", true);
      return true;
    }
    swap(live, await response.text());
    setState("updated " + new Date().toLocaleTimeString());
    const fields = live.querySelector(".fields[data-status]");
    return !(fields && FINISHED.includes(fields.dataset.status));
  }

  function autoRefresh(live) {
    const seconds = Number(live.dataset.refreshS || 0);
    if (!seconds) return;
    let timer = null;
    const tick = async () => {
      timer = null;
      if (document.hidden) return; // resumes on visibilitychange
      const again = await refresh(live);
      if (again) timer = setTimeout(tick, seconds * 1000);
    };
    timer = setTimeout(tick, seconds * 1000);
    document.addEventListener("visibilitychange", () => {
      if (!document.hidden && timer === null) tick();
    });
  }

  function logLine(event) {
    const line = document.createElement("div");
    line.className = "line k-" + event.kind;
    const time = document.createElement("time");
    time.textContent = new Date(event.at).toISOString().slice(11, 19);
    const kind = document.createElement("span");
    kind.className = "kind";
    kind.textContent = event.stage || event.kind;
    const msg = document.createElement("span");
    msg.className = "msg";
    msg.textContent = event.message;
    line.append(time, kind, msg);
    return line;
  }

  function followLog(log, live) {
    log.scrollTop = log.scrollHeight;
    if (log.dataset.finished === "true") return;
    const state = document.getElementById("log-state");
    const url = log.dataset.events + "?after=" + encodeURIComponent(log.dataset.after || "0");
    const source = new EventSource(url);
    let pending = null;
    const refreshSoon = () => {
      if (!live || pending) return;
      pending = setTimeout(() => {
        pending = null;
        refresh(live);
      }, 200);
    };
    const onEvent = (message) => {
      const event = JSON.parse(message.data);
      const atBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
      log.append(logLine(event));
      while (log.childElementCount > MAX_LOG_LINES) log.firstElementChild.remove();
      if (atBottom) log.scrollTop = log.scrollHeight;
      if (event.kind === "state") refreshSoon();
    };
    ["state", "stage", "log"].forEach((kind) => source.addEventListener(kind, onEvent));
    source.addEventListener("end", () => {
      source.close(); // otherwise the browser reconnects when the server ends the stream
      log.dataset.finished = "true";
      if (state) state.textContent = "complete";
      refreshSoon();
    });
    source.addEventListener("open", () => {
      if (state) state.textContent = "live";
    });
    source.addEventListener("error", () => {
      if (!state) return;
      state.textContent = source.readyState === EventSource.CLOSED ? "disconnected (reload the page)" : "reconnecting";
    });
  }

  document.addEventListener("DOMContentLoaded", () => {
    const live = document.getElementById("live");
    if (live) autoRefresh(live);
    const log = document.getElementById("log");
    if (log) followLog(log, live);
  });
})();
