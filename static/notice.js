// What a person is told without looking (see app.js for how the scripts
// are split). One polite live region says short news once each — a run's
// status when it changes, an answer that settled, "Message copied" —
// instead of every streamed token (a streaming answer is aria-busy). An
// answer that settles while the tab is hidden marks the tab's title and,
// when turned on in Settings, shows a notification. The same holds for a
// thread's answers and a room's (whose events carry the message's id:
// "status-42", "done-42").
(() => {
  "use strict";

  // The region exists before anything is said in it (screen readers ignore
  // regions that appear together with their text).
  const announcer = document.createElement("div");
  announcer.id = "announcer";
  announcer.className = "visually-hidden";
  announcer.setAttribute("aria-live", "polite");
  announcer.setAttribute("aria-atomic", "true");
  announcer.dataset.testid = "announcer";
  document.body.append(announcer);
  let lastSaid = "";
  // The same words twice in a row are made to differ, so they are said
  // again.
  const say = (text) => {
    announcer.textContent = text === lastSaid ? text + "\u00a0" : text;
    lastSaid = text;
  };
  window.Weft = window.Weft || {};
  Weft.say = say;

  const isEvent = (type, name) => type === name || (typeof type === "string" && type.startsWith(name + "-") && /^\d+$/.test(type.slice(name.length + 1)));

  // A run's status, when its label changes (status events repeat it).
  document.addEventListener("htmx:sseMessage", (event) => {
    if (!event.detail || !isEvent(event.detail.type, "status")) return;
    const bar = event.target;
    const status = bar.querySelector && bar.querySelector('[data-testid="run-status"]');
    if (status && status.textContent.trim() !== bar.dataset.said) {
      bar.dataset.said = status.textContent.trim();
      say(bar.dataset.said);
    }
  });

  // A settled answer. The "done" event replaces the placeholder; its id is
  // remembered before the swap and the new element is read after it.
  const finishing = new Set();
  document.addEventListener("htmx:sseBeforeMessage", (event) => {
    if (event.detail && isEvent(event.detail.type, "done") && event.target.id) finishing.add(event.target.id);
  });
  document.addEventListener("htmx:load", (event) => {
    const el = event.target;
    if (!(el instanceof Element) || !finishing.delete(el.id)) return;
    const how = { complete: "finished", cancelled: "stopped", error: "failed", interrupted: "interrupted" }[el.dataset.status] || "finished";
    const body = el.querySelector('[data-testid="message-body"]');
    const start = body ? body.textContent.trim().replace(/\s+/g, " ").slice(0, 160) : "";
    say("Answer " + how + (start ? ": " + start : "."));
    if (document.visibilityState === "hidden") noticeInBackground(how, start);
  });

  // The title keeps the count of answers settled unseen until the tab is
  // shown again.
  let unseen = 0;
  let plainTitle = document.title;
  const noticeInBackground = (how, start) => {
    if (unseen === 0) plainTitle = document.title;
    unseen++;
    document.title = (unseen === 1 ? "Answer " + how : unseen + " answers finished") + " · " + plainTitle;
    if (!notifying()) return;
    const where = document.querySelector("#thread-title, #room-title");
    try {
      const n = new Notification("Answer " + how + (where ? " · " + where.textContent.trim() : ""), {
        body: start, tag: "weft:" + location.pathname,
      });
      n.addEventListener("click", () => { window.focus(); n.close(); });
    } catch {
      // Chrome on Android notifies only through a service worker; the
      // title still says it.
    }
  };
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible" && unseen > 0) {
      unseen = 0;
      document.title = plainTitle;
    }
  });

  // Notifications are opt-in per browser: Settings' button
  // ([data-notify-toggle], aria-pressed) asks for the permission, only on
  // that click, and keeps the choice in localStorage.
  const NOTIFY_KEY = "weft:notify";
  const notifying = () => "Notification" in window && Notification.permission === "granted" &&
    localStorage.getItem(NOTIFY_KEY) === "on";
  const showNotifyState = () => {
    const button = document.querySelector("[data-notify-toggle]");
    const state = document.querySelector("[data-notify-state]");
    if (!button || !("Notification" in window)) return;
    button.hidden = false;
    button.setAttribute("aria-pressed", String(notifying()));
    if (state) {
      state.textContent = Notification.permission === "denied"
        ? "This browser blocks Weft's notifications: allow them in the browser's site settings."
        : notifying() ? "On: this browser shows a notification when an answer finishes in the background." : "Off.";
    }
  };
  document.addEventListener("click", (event) => {
    const button = event.target instanceof Element ? event.target.closest("[data-notify-toggle]") : null;
    if (!button || !("Notification" in window)) return;
    if (notifying()) {
      localStorage.removeItem(NOTIFY_KEY);
      showNotifyState();
      return;
    }
    Notification.requestPermission().then((permission) => {
      if (permission === "granted") localStorage.setItem(NOTIFY_KEY, "on");
      showNotifyState();
    });
  });
  showNotifyState();
})();
