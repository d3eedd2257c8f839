// Weft's client scripts: plain ES2020, no dependencies, no build step, a
// few small files by concern. The CSP forbids inline script, so what the
// markup asks for through data-* attributes and classes lives here. Each
// file but theme.js is loaded with defer after htmx (views/layout.templ),
// so it runs once the document is parsed: none waits for DOMContentLoaded.
// Every listener is delegated on document, so what htmx swaps in later
// works without rebinding anything.
//
//   theme.js   the stored theme on <html>, before the first paint
//   app.js     forms and the composer (this file)
//   files.js   files dropped, pasted or attached to the composer
//   shell.js   the theme toggle and the phone's sidebar drawer
//   copy.js    copy buttons: a code block's text, a whole message
//   notice.js  the live region (Weft.say) and the finished-answer notice
//   rooms.js   a room's mentions and its side panel
//   live.js    appended messages (a room's stream, a thread's live watch), never
//              twice; the thread's watch paused while its tab is hidden
//
// What they share is window.Weft.say (notice.js: say it in the live
// region).

(() => {
  "use strict";

  // The composer (form.composer) of a thread, the home page or a room that
  // holds el, if any; sentBy is the composer that made a request (not a
  // request of an element inside it, such as the context gauge's).
  const composerOf = (el) => (el instanceof Element ? el.closest("form.composer") : null);
  const sentBy = (el) => (el instanceof HTMLFormElement && el.matches("form.composer") ? el : null);

  // --- Forms ---

  // select[data-autosubmit] (the workspace switcher, a regeneration's
  // model) submits its form on change. requestSubmit() fires the submit
  // event (unlike submit()), so validation, data-confirm and htmx see it.
  document.addEventListener("change", (event) => {
    const el = event.target;
    if (!(el instanceof HTMLSelectElement) || !el.matches("select[data-autosubmit]")) return;
    const form = el.form || el.closest("form");
    if (form) form.requestSubmit();
  });

  // form[data-confirm] asks before submitting. Capture phase, so this runs
  // before any handler on the form itself (htmx's) and can stop it.
  document.addEventListener("submit", (event) => {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.hasAttribute("data-confirm")) return;
    if (!window.confirm(form.dataset.confirm)) {
      event.preventDefault();
      event.stopImmediatePropagation();
    }
  }, true);

  // --- Keys ---

  // In the composer, Enter sends and Shift+Enter keeps the newline. Enter
  // during an IME composition confirms the composition (keyCode 229 covers
  // Safari, which ends the composition before keydown). ↑ in an empty
  // composer edits the last message you sent; Ctrl/Cmd+K focuses search;
  // Esc stops the answer being written. (rooms.js takes Enter, Tab and Esc
  // first while its mention suggestions are open; shell.js takes Esc while
  // the drawer is open.)
  document.addEventListener("keydown", (event) => {
    const el = event.target;
    if ((event.ctrlKey || event.metaKey) && !event.altKey && event.key.toLowerCase() === "k") {
      const search = document.getElementById("search");
      if (search) {
        event.preventDefault();
        search.focus();
        search.select();
      }
      return;
    }
    if (event.isComposing || event.keyCode === 229) return;
    if (event.key === "Escape") {
      const stop = document.querySelector('[data-testid="stop"]');
      if (stop) {
        event.preventDefault();
        stop.click();
      }
      return;
    }
    if (!(el instanceof HTMLTextAreaElement) || !composerOf(el)) return;
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      // A held-down Enter must not send the same message several times.
      if (!event.repeat) composerOf(el).requestSubmit();
    } else if (event.key === "ArrowUp" && !event.shiftKey && el.value === "") {
      const mine = document.querySelectorAll('[data-testid="message"][data-role="user"] details.edit');
      const last = mine[mine.length - 1];
      if (!last) return;
      event.preventDefault();
      last.open = true;
      const editor = last.querySelector("textarea");
      if (editor) {
        editor.focus();
        editor.setSelectionRange(editor.value.length, editor.value.length);
      }
    }
  });

  // --- Sending ---

  // Before a send, the composer's menus and switches take what they show
  // as their default: the reset after it would otherwise put back the
  // model and role the page was rendered with, and the next message would
  // switch back to them. After an accepted send the message is cleared
  // (files.js clears the files on that reset) and the box keeps the focus.
  document.addEventListener("htmx:beforeRequest", (event) => {
    const form = sentBy(event.detail && event.detail.elt);
    if (!form) return;
    form.querySelectorAll("option").forEach((o) => { o.defaultSelected = o.selected; });
    form.querySelectorAll('input[type="checkbox"]').forEach((box) => { box.defaultChecked = box.checked; });
  });
  document.addEventListener("htmx:afterRequest", (event) => {
    const form = sentBy(event.detail && event.detail.elt);
    if (!form) return;
    const box = form.querySelector("textarea");
    if (event.detail.successful) {
      form.reset();
      if (box) box.focus();
    }
    if (box) updateHelp(box);
  });

  // --- Drafts ---

  // Unsent text is kept per composer target (a thread's or a room's
  // messages URL, or "/t" for a new thread in a workspace) in this
  // browser, across navigation and reloads; a sent message is no draft.
  const draftKey = (form) => "weft:draft:" + form.getAttribute("action") + ":" + (form.querySelector('[name="workspace_id"]') || {}).value;
  document.querySelectorAll("form.composer").forEach((form) => {
    const box = form.querySelector("textarea");
    const saved = box && localStorage.getItem(draftKey(form));
    if (box && saved && box.value === "") box.value = saved;
  });
  document.addEventListener("input", (event) => {
    const box = event.target;
    const form = composerOf(box);
    if (!form || !(box instanceof HTMLTextAreaElement)) return;
    if (box.value) {
      localStorage.setItem(draftKey(form), box.value);
    } else {
      localStorage.removeItem(draftKey(form));
    }
    updateHelp(box);
  });
  document.addEventListener("submit", (event) => {
    const form = event.target;
    if (form instanceof HTMLFormElement && form.matches("form.composer")) localStorage.removeItem(draftKey(form));
  });

  // --- Slash commands ---

  // The help (.slash-help) shows while the message starts with one "/"
  // and lists the commands that match what is typed so far.
  function updateHelp(box) {
    const help = composerOf(box)?.querySelector(".slash-help");
    if (!help) return;
    const v = box.value;
    const typing = v.startsWith("/") && !v.startsWith("//");
    const word = typing ? v.split(/\s/, 1)[0].toLowerCase() : "";
    let shown = 0;
    help.querySelectorAll("li[data-command]").forEach((li) => {
      const match = typing && (li.dataset.command.startsWith(word) || word === "/");
      li.hidden = !match;
      if (match) shown++;
    });
    help.hidden = !typing || shown === 0;
  }

  // --- Following the conversation ---

  // A thread (#messages) or a room (#room-messages) opens at its end and
  // stays there while new text arrives, unless the reader scrolled up. A
  // swap on another page (a knowledge base's documents refreshing) leaves
  // the reader where they are.
  const line = () => document.querySelector("#messages, #room-messages");
  const nearBottom = () => window.innerHeight + window.scrollY >= document.body.scrollHeight - 80;
  let stick = true;
  const follow = () => {
    if (stick && line()) window.scrollTo(0, document.body.scrollHeight);
  };
  window.addEventListener("scroll", () => { stick = nearBottom(); }, { passive: true });
  document.addEventListener("htmx:afterSwap", follow);
  document.addEventListener("htmx:sseMessage", follow);
  follow();

  // A thread's answer that settles (not one still streaming) tells the
  // page (weft:answered: the context gauge refreshes); when a summary was
  // written for it that the page does not show yet, the thread is read
  // again to show it.
  let pending = 0;
  document.addEventListener("htmx:load", (event) => {
    const el = event.target;
    if (!(el instanceof Element) || !el.matches('[data-testid="message"][data-role="assistant"]')) return;
    if (el.dataset.status === "streaming") return;
    clearTimeout(pending);
    pending = setTimeout(() => document.body.dispatchEvent(new CustomEvent("weft:answered")), 50);
    const summary = el.dataset.compacted;
    if (summary && !document.getElementById("c" + summary) && document.getElementById("messages")) {
      htmx.ajax("GET", location.pathname + location.search, { target: "#messages", select: "#messages", swap: "outerHTML" });
    }
  });
})();
