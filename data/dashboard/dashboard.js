// contextd dashboard: saves a grid cell when it changes, sends the forms
// without leaving the page, and re-reads the page when the broker says
// something changed (server-sent events). Everything works without it
// but the live updates and the grid's cells. Every address is relative:
// the page lives under its session's path (/s/CAP/), which is part of
// what proves the session.
"use strict";
(function () {
  const csrf = document.querySelector('meta[name="csrf"]')?.content || "";
  // The session's root (/s/CAP/), whatever page of it this is: a
  // category's and an app's pages are one level further down.
  const root = location.pathname.split("/").slice(0, 3).join("/") + "/";
  const status = (msg) => {
    const s = document.getElementById("status");
    if (s) s.textContent = msg;
  };

  async function post(action, params) {
    params.set("csrf", csrf);
    const r = await fetch(action, {
      method: "POST",
      headers: { "X-Dashboard": "1", "Content-Type": "application/x-www-form-urlencoded" },
      body: params.toString(),
      credentials: "same-origin",
    });
    if (!r.ok) {
      const doc = new DOMParser().parseFromString(await r.text(), "text/html");
      throw new Error(doc.querySelector("main p")?.textContent || r.statusText);
    }
  }

  // Re-read the page and put its <main> in place, keeping the focus.
  let refreshing = null;
  let again = false;
  async function refresh() {
    if (refreshing) { again = true; return refreshing; }
    refreshing = (async () => {
      do {
        again = false;
        const r = await fetch(location.pathname, { credentials: "same-origin" });
        if (!r.ok) return;
        const doc = new DOMParser().parseFromString(await r.text(), "text/html");
        const fresh = doc.getElementById("main");
        const main = document.getElementById("main");
        const pause = doc.querySelector("form.pause");
        if (!fresh || !main) return;
        const active = document.activeElement;
        const key = active && focusKey(active);
        main.replaceWith(fresh);
        const oldPause = document.querySelector("form.pause");
        if (pause && oldPause) oldPause.replaceWith(pause);
        if (key) {
          const target = document.querySelector(key);
          if (target) target.focus();
        }
      } while (again);
    })();
    try { await refreshing; } finally { refreshing = null; }
  }

  function focusKey(el) {
    if (el.id) return "#" + CSS.escape(el.id);
    const label = el.getAttribute("aria-label");
    if (label) return el.tagName.toLowerCase() + '[aria-label="' + CSS.escape(label) + '"]';
    return null;
  }

  document.addEventListener("change", async (e) => {
    const sel = e.target;
    if (!(sel instanceof HTMLSelectElement) || !sel.hasAttribute("data-cell")) return;
    const p = new URLSearchParams();
    p.set("app", sel.dataset.app);
    p.set("category", sel.dataset.category);
    p.set("decision", sel.value);
    p.set("for", document.getElementById("expiry")?.value || "");
    try {
      await post(root + "decide", p);
      sel.closest("td")?.setAttribute("data-decision", sel.value);
      status("Saved: " + sel.getAttribute("aria-label") + " — " + sel.options[sel.selectedIndex].text);
    } catch (err) {
      status("Not saved: " + err.message);
    }
  });

  document.addEventListener("submit", async (e) => {
    const form = e.target;
    if (!(form instanceof HTMLFormElement) || !form.hasAttribute("data-fetch")) return;
    e.preventDefault();
    const ask = form.dataset.confirm;
    if (ask && !window.confirm(ask)) return;
    try {
      await post(form.action, new URLSearchParams(new FormData(form)));
      status("Done.");
      await refresh();
    } catch (err) {
      status("Not done: " + err.message);
    }
  });

  const events = new EventSource(root + "events");
  events.addEventListener("changed", () => { refresh(); });
  window.addEventListener("pagehide", () => events.close());
})();
