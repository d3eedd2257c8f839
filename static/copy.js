// Copy buttons (see app.js for how the scripts are split). A code block's
// (views/markdown_code.go: a .code-block with button[data-copy] and its
// <code>) copies the code's text; a message's (views/message_extras.templ:
// button[data-copy-message]) copies the message's markdown, its source
// text, fetched on click from the URL the button names (so the page does
// not carry every message twice). Both go through write().
(() => {
  "use strict";

  const FEEDBACK_MS = 1500;

  // write puts text (a string, or a promise of one) on the clipboard and
  // answers whether it did. It is called during the click: Safari wants
  // the clipboard written in the click's handler, so it is given a promise
  // of the text (ClipboardItem); elsewhere writeText once the text is
  // there. Without the async clipboard API (plain http on a LAN address is
  // not a secure context) the old copy command on a hidden textarea does
  // it, still within the click's user activation.
  const write = (text) => {
    const pending = Promise.resolve(text);
    const clip = window.isSecureContext && navigator.clipboard;
    let written;
    if (clip && window.ClipboardItem && clip.write) {
      const blob = pending.then((t) => new Blob([t], { type: "text/plain" }));
      written = clip.write([new ClipboardItem({ "text/plain": blob })]).catch(() => pending.then((t) => clip.writeText(t)));
    } else if (clip) {
      written = pending.then((t) => clip.writeText(t));
    } else {
      written = Promise.reject(new Error("no clipboard API"));
    }
    return written.then(() => true, () => pending.then(copyCommand, () => false));
  };

  const copyCommand = (text) => {
    const back = document.activeElement;
    const area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "visually-hidden";
    document.body.append(area);
    area.select();
    let ok = false;
    try { ok = document.execCommand("copy"); } catch { ok = false; }
    area.remove();
    if (back instanceof HTMLElement) back.focus();
    return ok;
  };

  // After a while a button shows what it showed before.
  const timers = new WeakMap();
  const restore = (button, undo) => {
    clearTimeout(timers.get(button));
    timers.set(button, setTimeout(undo, FEEDBACK_MS));
  };

  // A code block's button says "Copied" for a moment; when nothing could
  // be written, the code is left selected for Ctrl+C / Cmd+C.
  const labels = new WeakMap(); // button → its own label ("Copy")
  const copyCode = (button, code) => {
    if (!labels.has(button)) labels.set(button, button.textContent);
    // Blocks end with a newline; a pasted snippet should not.
    write(code.textContent.replace(/\n$/, "")).then((ok) => {
      if (!ok) {
        const range = document.createRange();
        range.selectNodeContents(code);
        window.getSelection()?.removeAllRanges();
        window.getSelection()?.addRange(range);
      }
      button.textContent = ok ? "Copied" : "Selected";
      button.classList.toggle("copied", ok);
      restore(button, () => {
        button.textContent = labels.get(button);
        button.classList.remove("copied");
      });
    });
  };

  // A message's button turns its icon into a check with a "Copied" bubble
  // (app.css) and a hidden label that says so, and the announcer says it.
  // The page carries neither the check nor the label (a thread's page has
  // up to 100 messages): they are made here.
  const copyMessage = (button) => {
    const text = fetch(button.dataset.copyMessage, { credentials: "same-origin" })
      .then((r) => (r.ok ? r.text() : Promise.reject(new Error("HTTP " + r.status))));
    write(text).then((ok) => {
      let label = button.querySelector(".copy-message-label");
      if (!label) {
        label = document.createElement("span");
        label.className = "copy-message-label visually-hidden";
        button.append(label);
      }
      const icon = button.querySelector("use");
      button.classList.toggle("copied", ok);
      label.textContent = ok ? "Copied" : "Not copied";
      if (ok) icon?.setAttribute("href", "#i-check");
      window.Weft?.say?.(ok ? "Message copied" : "The message could not be copied");
      restore(button, () => {
        button.classList.remove("copied");
        label.textContent = "";
        icon?.setAttribute("href", "#i-copy");
      });
    });
  };

  document.addEventListener("click", (event) => {
    const target = event.target instanceof Element ? event.target : null;
    const message = target?.closest("button[data-copy-message]");
    if (message) {
      copyMessage(message);
      return;
    }
    const button = target?.closest("button[data-copy]");
    const code = button?.closest(".code-block")?.querySelector("code");
    if (code) copyCode(button, code);
  });
})();
