// Live threads, issue 21 (see app.js for how the scripts are split): a
// thread page's live watch (views.ThreadLive) and, shared with a room's
// stream (views.RoomLive), how an appended message the page already shows
// is handled.
(() => {
  "use strict";

  // A room's stream and a thread page's live watch append each new
  // message. Either may send one the page already shows: a room's stream
  // after a reconnection sends again the messages from just before the
  // oldest answer still being written, and a thread's watch sends the tab
  // that sent a message what its own send already drew. Such a message
  // replaces the one shown when its state differs (a placeholder by its
  // final form, a stopped answer by the placeholder of a run that goes on
  // with it); otherwise it is dropped, so nothing appears twice and a
  // placeholder that is following its answer is left alone.
  const messageOf = (root) => root.querySelector('[data-testid="message"]');
  const sameState = (a, b) => a.dataset.status === b.dataset.status && a.dataset.runId === b.dataset.runId;
  document.addEventListener("htmx:sseBeforeMessage", (event) => {
    const msg = event.detail;
    if (!msg || (msg.type !== "room-append" && msg.type !== "thread-append")) return;
    const tpl = document.createElement("template");
    tpl.innerHTML = msg.data;
    const item = messageOf(tpl.content);
    const old = item && item.id ? document.getElementById(item.id) : null;
    if (!old) return;
    event.preventDefault();
    if (sameState(old, item)) return;
    htmx.swap(old, item.outerHTML, { swapStyle: "outerHTML", swapDelay: 0, settleDelay: 0 });
  });

  // The other way round: the thread's watch may have drawn a message
  // before the send that wrote it answers; the send's copy is dropped.
  document.addEventListener("htmx:beforeSwap", (event) => {
    const d = event.detail;
    const form = d.requestConfig && d.requestConfig.elt;
    if (!form || !form.matches("form.composer") || !d.shouldSwap || !d.target || d.target.id !== "messages") return;
    const tpl = document.createElement("template");
    tpl.innerHTML = d.serverResponse;
    const shown = [...tpl.content.children].filter((el) => el.matches('[data-testid="message"]') && el.id && document.getElementById(el.id));
    if (shown.length === 0) return;
    shown.forEach((el) => el.remove());
    d.serverResponse = tpl.innerHTML;
  });

  // A thread's watch holds a connection while its tab is shown only:
  // over HTTP/1.1 a browser opens at most six connections to a server, and
  // watches of tabs in the background would take them all. Hidden, the
  // watch closes; shown again, it opens from the last message the page
  // shows (and the run writing it), so it sends what came meanwhile.
  const pauseWatch = () => {
    const live = document.getElementById("thread-live");
    if (!live || document.hidden !== live.hasAttribute("sse-connect")) return;
    const next = live.cloneNode(true);
    if (document.hidden) {
      next.removeAttribute("sse-connect");
    } else {
      const all = document.querySelectorAll('#messages > [data-testid="message"]');
      const last = all[all.length - 1];
      const run = last && last.dataset.status === "streaming" ? last.dataset.runId || "0" : "0";
      next.setAttribute("sse-connect", `${live.dataset.watch}?leaf=${last ? last.dataset.messageId : "0"}&run=${run}`);
    }
    htmx.swap(live, next.outerHTML, { swapStyle: "outerHTML", swapDelay: 0, settleDelay: 0 });
  };
  document.addEventListener("visibilitychange", pauseWatch);
  // A page opened in the background closes its watch once htmx opened it.
  document.addEventListener("htmx:load", () => { if (document.hidden) pauseWatch(); });
})();
