// Weft's small client script. Plain ES2020, no dependencies, loaded with
// defer after htmx. The CSP forbids inline script, so behaviour that markup
// asks for via data-* attributes lives here.
(() => {
  "use strict";

  // Every listener is delegated on document, so forms swapped in by htmx
  // later work without rebinding anything.

  // select[data-autosubmit] (the workspace switcher) submits its form on
  // change. requestSubmit() fires the submit event (unlike submit()), so
  // validation, data-confirm and htmx still see it.
  document.addEventListener("change", (event) => {
    const el = event.target;
    if (!(el instanceof HTMLSelectElement) || !el.matches("select[data-autosubmit]")) return;
    const form = el.form || el.closest("form");
    if (form) form.requestSubmit();
  });

  // form[data-confirm] asks before submitting. Capture phase, so this runs
  // before any handler on the form itself (e.g. htmx) and can stop it.
  document.addEventListener(
    "submit",
    (event) => {
      const form = event.target;
      if (!(form instanceof HTMLFormElement) || !form.hasAttribute("data-confirm")) return;
      if (!window.confirm(form.dataset.confirm)) {
        event.preventDefault();
        event.stopImmediatePropagation();
      }
    },
    true,
  );

  // In the composer, Enter sends and Shift+Enter keeps the default newline.
  // Enter during an IME composition confirms the composition, so leave it
  // alone (keyCode 229 covers Safari, which ends composition before keydown).
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Enter" || event.shiftKey) return;
    if (event.isComposing || event.keyCode === 229) return;
    const el = event.target;
    if (!(el instanceof HTMLTextAreaElement) || !el.matches(".composer textarea")) return;
    const form = el.form || el.closest("form");
    if (!form) return;
    event.preventDefault();
    // A held-down Enter must not send the same message several times.
    if (event.repeat) return;
    form.requestSubmit();
  });
})();

// Copy buttons of code blocks in rendered answers (views/markdown.go writes
// <div class="code-block"> … <button data-copy> … <code>). Its own IIFE, so
// the block above stays as it is.
(() => {
  "use strict";

  const FEEDBACK_MS = 1500;
  const timers = new WeakMap(); // button → pending label reset
  const labels = new WeakMap(); // button → its own label ("Copy")

  // Shows label on the button for a moment, then puts its own label back.
  const feedback = (button, label, copied) => {
    if (!labels.has(button)) labels.set(button, button.textContent);
    clearTimeout(timers.get(button));
    button.textContent = label;
    button.classList.toggle("copied", copied);
    timers.set(
      button,
      setTimeout(() => {
        button.textContent = labels.get(button);
        button.classList.remove("copied");
        timers.delete(button);
      }, FEEDBACK_MS),
    );
  };

  // Without the async clipboard API (it needs a secure context: https or
  // localhost) select the code, try the old copy command, and otherwise
  // leave the selection for Ctrl+C / Cmd+C.
  const fallback = (button, code) => {
    const selection = window.getSelection();
    if (!selection) return;
    const range = document.createRange();
    range.selectNodeContents(code);
    selection.removeAllRanges();
    selection.addRange(range);
    let copied = false;
    try {
      copied = document.execCommand("copy");
    } catch {
      copied = false;
    }
    feedback(button, copied ? "Copied" : "Selected", copied);
  };

  // button[data-copy] copies the text of the code in the same .code-block.
  document.addEventListener("click", (event) => {
    const target = event.target;
    if (!(target instanceof Element)) return;
    const button = target.closest("button[data-copy]");
    if (!button) return;
    const code = button.closest(".code-block")?.querySelector("code");
    if (!code) return;
    // Blocks end with a newline; a pasted snippet should not.
    const text = code.textContent.replace(/\n$/, "");
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(
        () => feedback(button, "Copied", true),
        () => fallback(button, code),
      );
    } else {
      fallback(button, code);
    }
  });
})();

// Runs: Esc stops the current answer, the composer clears after an accepted
// send, and the thread follows a streaming answer when already at the bottom.
(function () {
  "use strict";

  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || event.isComposing) return;
    const stop = document.querySelector('[data-testid="stop"]');
    if (stop) {
      event.preventDefault();
      stop.click();
    }
  });

  document.addEventListener("htmx:afterRequest", (event) => {
    const form = event.detail && event.detail.elt;
    if (form && form.matches && form.matches("form.composer") && event.detail.successful) {
      form.reset();
      const box = form.querySelector("textarea");
      if (box) box.focus();
    }
  });

  // Stick to the bottom while new text arrives, unless the reader scrolled
  // up. Only a thread (#messages) follows its end: a swap on another page
  // (a knowledge base's documents refreshing) leaves the reader where they are.
  const nearBottom = () => window.innerHeight + window.scrollY >= document.body.scrollHeight - 80;
  let stick = true;
  const follow = () => {
    if (stick && document.getElementById("messages")) window.scrollTo(0, document.body.scrollHeight);
  };
  window.addEventListener("scroll", () => { stick = nearBottom(); }, { passive: true });
  document.addEventListener("htmx:afterSwap", follow);
  document.addEventListener("htmx:sseMessage", follow);
})();

// Keyboard and drafts: Ctrl/Cmd+K focuses search; ↑ in an empty composer
// edits the last message you sent; unsent composer text is kept per thread
// (in this browser) across navigation and reloads.
(function () {
  "use strict";

  document.addEventListener("keydown", (event) => {
    if ((event.ctrlKey || event.metaKey) && !event.altKey && event.key.toLowerCase() === "k") {
      const search = document.getElementById("search");
      if (search) {
        event.preventDefault();
        search.focus();
        search.select();
      }
      return;
    }
    const box = event.target;
    if (event.key === "ArrowUp" && !event.shiftKey && !event.isComposing &&
        box.matches && box.matches("form.composer textarea") && box.value === "") {
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

  // One draft per composer target (a thread's messages URL, or "/t" for a
  // new thread in a workspace).
  const draftKey = (form) => "weft:draft:" + form.getAttribute("action") + ":" + (form.querySelector('[name="workspace_id"]') || {}).value;

  const restore = () => {
    document.querySelectorAll("form.composer").forEach((form) => {
      const box = form.querySelector("textarea");
      const saved = box && localStorage.getItem(draftKey(form));
      if (box && saved && box.value === "") box.value = saved;
    });
  };
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", restore);
  } else {
    restore();
  }

  document.addEventListener("input", (event) => {
    const form = event.target.closest && event.target.closest("form.composer");
    if (!form || event.target.tagName !== "TEXTAREA") return;
    const key = draftKey(form);
    if (event.target.value) {
      localStorage.setItem(key, event.target.value);
    } else {
      localStorage.removeItem(key);
    }
  });

  // A sent message is no longer a draft.
  document.addEventListener("submit", (event) => {
    const form = event.target;
    if (form.matches && form.matches("form.composer")) localStorage.removeItem(draftKey(form));
  });
})();

// Context: the composer's slash-command help, selects that keep their
// choice after a send, and what follows a finished answer (the context
// gauge refreshes; a summary written for it appears in the thread).
(function () {
  "use strict";

  // The help shows while the message starts with one "/" and lists the
  // commands that match what is typed so far.
  const updateHelp = (box) => {
    const form = box.closest("form.composer");
    const help = form && form.querySelector(".slash-help");
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
  };
  document.addEventListener("input", (event) => {
    const box = event.target;
    if (box instanceof HTMLTextAreaElement && box.matches("form.composer textarea")) updateHelp(box);
  });

  // form.reset() would put the model and role menus back to what the page
  // was rendered with, and the next message would switch back to them.
  document.addEventListener("htmx:beforeRequest", (event) => {
    const form = event.detail && event.detail.elt;
    if (!form || !form.matches || !form.matches("form.composer")) return;
    form.querySelectorAll("select").forEach((sel) => {
      sel.querySelectorAll("option").forEach((o) => { o.defaultSelected = o.selected; });
    });
    form.querySelectorAll('input[type="checkbox"]').forEach((box) => { box.defaultChecked = box.checked; });
  });
  document.addEventListener("htmx:afterRequest", (event) => {
    const form = event.detail && event.detail.elt;
    if (!form || !form.matches || !form.matches("form.composer")) return;
    const box = form.querySelector("textarea");
    if (box) updateHelp(box);
  });

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

// Files dragged over a form matching selector mark it "dropping"; files
// dropped on it go to onFiles(form, files) (a FileList). One function for
// the knowledge-base upload form and the composer, so both behave alike.
const acceptFileDrops = (selector, onFiles) => {
  "use strict";
  const target = (event) => event.target.closest && event.target.closest(selector);
  ["dragenter", "dragover"].forEach((type) => document.addEventListener(type, (event) => {
    const form = target(event);
    if (!form || !event.dataTransfer || ![...event.dataTransfer.types].includes("Files")) return;
    event.preventDefault();
    form.classList.add("dropping");
  }));
  document.addEventListener("dragleave", (event) => {
    const form = target(event);
    if (form && !form.contains(event.relatedTarget)) form.classList.remove("dropping");
  });
  document.addEventListener("drop", (event) => {
    const form = target(event);
    if (!form || !event.dataTransfer || event.dataTransfer.files.length === 0) return;
    event.preventDefault();
    form.classList.remove("dropping");
    onFiles(form, event.dataTransfer.files);
  });
};

// Knowledge bases: files dropped on an upload form (form[data-drop]) are
// put in its file input and sent at once.
acceptFileDrops("form[data-drop]", (form, files) => {
  const input = form.querySelector('input[type="file"]');
  if (!input) return;
  input.files = files;
  form.requestSubmit();
});

// Composer attachments: files dropped on or pasted into the composer join
// its file input (they are sent with the message); the chosen files are
// listed; "Attach to next message" on a generated image adds it.
(function () {
  "use strict";

  const composer = () => document.querySelector('form.composer');
  const fileInput = (form) => form && form.querySelector('input[type="file"][name="files"]');

  const listFiles = (form) => {
    const input = fileInput(form);
    const list = form && form.querySelector("[data-file-list]");
    if (!input || !list) return;
    list.textContent = [...input.files].map((f) => f.name).join(", ");
  };

  const addFiles = (form, files) => {
    const input = fileInput(form);
    if (!input || files.length === 0) return;
    const dt = new DataTransfer();
    [...input.files, ...files].forEach((f) => dt.items.add(f));
    input.files = dt.files;
    listFiles(form);
  };

  document.addEventListener("change", (event) => {
    if (event.target.matches && event.target.matches('form.composer input[name="files"]')) listFiles(event.target.form);
  });
  document.addEventListener("paste", (event) => {
    const form = event.target.closest && event.target.closest("form.composer");
    if (!form || !event.clipboardData || event.clipboardData.files.length === 0) return;
    event.preventDefault();
    addFiles(form, [...event.clipboardData.files]);
  });
  acceptFileDrops("form[data-drop-files]", (form, files) => addFiles(form, [...files]));
  document.addEventListener("htmx:afterRequest", (event) => {
    const form = event.detail && event.detail.elt;
    if (form && form.matches && form.matches("form.composer") && event.detail.successful) {
      listFiles(form);
      form.querySelectorAll('#composer-media > *').forEach((el) => el.remove());
    }
  });
  document.addEventListener("click", (event) => {
    const button = event.target.closest && event.target.closest("[data-attach-media]");
    const form = composer();
    if (!button || !form) return;
    const id = button.dataset.attachMedia;
    const box = form.querySelector("#composer-media");
    if (!box || box.querySelector(`input[value="${CSS.escape(id)}"]`)) return;
    const chip = document.createElement("span");
    chip.className = "media-chip";
    chip.dataset.testid = "attached-media";
    chip.textContent = "image " + id + " ";
    const input = document.createElement("input");
    input.type = "hidden";
    input.name = "media";
    input.value = id;
    const remove = document.createElement("button");
    remove.type = "button";
    remove.className = "link";
    remove.textContent = "×";
    remove.addEventListener("click", () => chip.remove());
    chip.append(input, remove);
    box.append(chip);
  });
})();

// Rooms (issue 20) and live threads (issue 21): streams that append
// messages, and the composer's mentions.
(() => {
  "use strict";

  // A room's stream (views.RoomLive) and a thread page's live watch
  // (views.ThreadLive) append each new message. Either may send one the
  // page already shows: a room's stream after a reconnection sends again
  // the messages from just before the oldest answer still being written,
  // and a thread's watch sends the tab that sent a message what its own
  // send already drew. Such a message replaces the one shown when its
  // state differs (a placeholder by its final form, a stopped answer by
  // the placeholder of a run that goes on with it); otherwise it is
  // dropped, so nothing appears twice and a placeholder that is following
  // its answer is left alone.
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

  // Mention suggestions: in a composer holding a list of the room's agents
  // (views.MentionSuggestions, hidden), typing "@" and the start of a name
  // shows the agents whose names start so; a click, Tab or Enter puts
  // "@Name " in place of what was typed, Escape hides the list.
  const listOf = (box) => box.form && box.form.querySelector("[data-mention-list]");
  const typed = (box) => {
    const m = /(^|[^\w@])@([A-Za-z0-9_-]*)$/.exec(box.value.slice(0, box.selectionStart));
    return m ? m[2] : null;
  };
  const shown = (list) => [...list.querySelectorAll("[data-mention]")].filter((b) => !b.hidden);
  const hide = (list) => { list.hidden = true; };
  const update = (box) => {
    const list = listOf(box);
    if (!list) return;
    const prefix = typed(box);
    if (prefix === null) return hide(list);
    let any = false;
    list.querySelectorAll("[data-mention]").forEach((b) => {
      b.hidden = !b.dataset.mention.toLowerCase().startsWith(prefix.toLowerCase());
      any = any || !b.hidden;
    });
    list.hidden = !any;
  };
  const insert = (box, name) => {
    const prefix = typed(box);
    if (prefix === null) return;
    const at = box.selectionStart - prefix.length - 1; // the "@"
    box.setRangeText("@" + name + " ", at, box.selectionStart, "end");
    box.focus();
    hide(listOf(box));
  };
  document.addEventListener("input", (event) => {
    if (event.target instanceof HTMLTextAreaElement) update(event.target);
  });
  document.addEventListener("click", (event) => {
    const b = event.target.closest && event.target.closest("[data-mention]");
    const box = b && b.form && b.form.querySelector("textarea");
    if (box) insert(box, b.dataset.mention);
  });
  // Capture phase: before the composer's Enter-sends and Escape-stops.
  document.addEventListener("keydown", (event) => {
    const box = event.target;
    if (!(box instanceof HTMLTextAreaElement)) return;
    const list = listOf(box);
    if (!list || list.hidden || event.isComposing) return;
    if (event.key === "Escape") {
      hide(list);
    } else if (event.key === "Tab" || event.key === "Enter") {
      const first = shown(list)[0];
      if (!first) return;
      insert(box, first.dataset.mention);
    } else {
      return;
    }
    event.preventDefault();
    event.stopImmediatePropagation();
  }, true);
})();

// The shell: the theme toggle and, on a narrow window, the sidebar drawer.
(function () {
  "use strict";

  // Theme: the toggle flips between light and dark. A choice equal to the
  // system's scheme is not stored, so toggling twice follows the system
  // again; theme.js applies a stored one before the first paint.
  const KEY = "weft:theme";
  const systemDark = window.matchMedia("(prefers-color-scheme: dark)");
  const isDark = () => (document.documentElement.dataset.theme || (systemDark.matches ? "dark" : "light")) === "dark";
  const showTheme = () => {
    document.querySelectorAll('[data-testid="theme-toggle"]').forEach((b) => b.setAttribute("aria-pressed", String(isDark())));
  };
  const setTheme = (dark) => {
    const root = document.documentElement;
    try {
      if (dark === systemDark.matches) {
        delete root.dataset.theme;
        localStorage.removeItem(KEY);
      } else {
        root.dataset.theme = dark ? "dark" : "light";
        localStorage.setItem(KEY, root.dataset.theme);
      }
    } catch {
      root.dataset.theme = dark ? "dark" : "light"; // not kept, but shown
    }
    showTheme();
  };
  systemDark.addEventListener("change", showTheme);
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", showTheme);
  } else {
    showTheme();
  }
  // Another tab changed it.
  window.addEventListener("storage", (event) => {
    if (event.key !== KEY) return;
    if (event.newValue === "light" || event.newValue === "dark") {
      document.documentElement.dataset.theme = event.newValue;
    } else {
      delete document.documentElement.dataset.theme;
    }
    showTheme();
  });

  // Drawer: .app[data-drawer] is "open" or "closed"; app.css shows it as a
  // drawer only below its phone breakpoint (keep the width in step). While
  // it is open the page behind it is inert (the keyboard stays in the
  // drawer); opening moves the focus into it; Esc, the scrim or the close
  // button shut it and bring the focus back to the menu button, and so
  // does a window grown past the breakpoint.
  const phone = window.matchMedia("(max-width: 860px)");
  const app = () => document.querySelector(".app");
  const opener = () => document.querySelector("[data-drawer-open]");
  const setDrawer = (open) => {
    const shell = app();
    if (!shell) return;
    shell.dataset.drawer = open ? "open" : "closed";
    shell.querySelectorAll(":scope > .main, :scope > .topbar").forEach((el) => { el.inert = open; });
    const button = opener();
    if (button) button.setAttribute("aria-expanded", String(open));
    if (open) {
      const first = document.querySelector("#sidebar .drawer-close");
      if (first) first.focus();
    } else if (button && document.getElementById("sidebar")?.contains(document.activeElement)) {
      button.focus();
    }
  };

  document.addEventListener("click", (event) => {
    const target = event.target instanceof Element ? event.target : null;
    if (!target) return;
    if (target.closest('[data-testid="theme-toggle"]')) {
      setTheme(!isDark());
    } else if (target.closest("[data-drawer-open]")) {
      setDrawer(true);
    } else if (target.closest("[data-drawer-close]")) {
      setDrawer(false);
    }
  });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && app()?.dataset.drawer === "open") {
      event.preventDefault();
      event.stopImmediatePropagation();
      setDrawer(false);
    }
  }, true);
  // A page restored from the back/forward cache starts with the drawer
  // shut; so does a window grown past the phone breakpoint.
  window.addEventListener("pageshow", () => { if (app()?.dataset.drawer === "open") setDrawer(false); });
  phone.addEventListener("change", () => { if (!phone.matches && app()?.dataset.drawer === "open") setDrawer(false); });
})();

// Issue 21: what a person expects of an answer. One polite live region
// announces short news (a status change, a finished answer, "copied")
// once each, instead of every streamed token; the copy button of every
// message copies its markdown; an answer that finishes while the tab is
// hidden marks the tab's title and, when turned on in Settings, shows a
// notification.
(function () {
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
  const say = (text) => {
    // The same words twice in a row are said again only after a change.
    announcer.textContent = text === lastSaid ? text + "\u00a0" : text;
    lastSaid = text;
  };

  // The run's status, when its label changes (status events also repeat it).
  document.addEventListener("htmx:sseMessage", (event) => {
    if (!event.detail || event.detail.type !== "status") return;
    const status = event.target.querySelector && event.target.querySelector('[data-testid="run-status"]');
    if (status && status.textContent.trim() !== event.target.dataset.said) {
      event.target.dataset.said = status.textContent.trim();
      say(event.target.dataset.said);
    }
  });

  // Copy a whole message: its markdown comes from GET /m/{id}/markdown.
  // The clipboard is written during the click (Safari requires that) with a
  // promise of the text; without the async clipboard API (plain http on a
  // LAN address is not a secure context) a hidden textarea and the old copy
  // command do it.
  const resetTimers = new WeakMap();
  const copied = (button, ok) => {
    const label = button.querySelector(".copy-message-label");
    button.classList.toggle("copied", ok);
    if (label) label.textContent = ok ? "Copied" : "Not copied";
    say(ok ? "Message copied" : "The message could not be copied");
    clearTimeout(resetTimers.get(button));
    resetTimers.set(button, setTimeout(() => {
      button.classList.remove("copied");
      if (label) label.textContent = "Copy";
    }, 1500));
  };
  const copyCommand = (text, button) => {
    const area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "visually-hidden";
    document.body.append(area);
    area.select();
    let ok = false;
    try { ok = document.execCommand("copy"); } catch { ok = false; }
    area.remove();
    button.focus();
    return ok;
  };
  document.addEventListener("click", (event) => {
    const button = event.target.closest && event.target.closest("button[data-copy-message]");
    if (!button) return;
    const text = fetch(button.dataset.copyMessage, { credentials: "same-origin" })
      .then((r) => (r.ok ? r.text() : Promise.reject(new Error("HTTP " + r.status))));
    const clip = window.isSecureContext && navigator.clipboard;
    let written;
    if (clip && window.ClipboardItem && clip.write) {
      const blob = text.then((t) => new Blob([t], { type: "text/plain" }));
      written = clip.write([new ClipboardItem({ "text/plain": blob })]).catch(() => text.then((t) => clip.writeText(t)));
    } else if (clip) {
      written = text.then((t) => clip.writeText(t));
    } else {
      written = Promise.reject(new Error("no clipboard API"));
    }
    written.then(() => copied(button, true),
      () => text.then((t) => copied(button, copyCommand(t, button)), () => copied(button, false)));
  });

  // A finished answer. The "done" event replaces the placeholder; its id
  // is remembered before the swap and the new element is read after it.
  const finishing = new Set();
  document.addEventListener("htmx:sseBeforeMessage", (event) => {
    if (event.detail && event.detail.type === "done" && event.target.id) finishing.add(event.target.id);
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

  // The title keeps the count of answers finished unseen until the tab is
  // shown again.
  let unseen = 0;
  let plainTitle = document.title;
  const noticeInBackground = (how, start) => {
    if (unseen === 0) plainTitle = document.title;
    unseen++;
    document.title = (unseen === 1 ? "Answer " + how : unseen + " answers finished") + " · " + plainTitle;
    if (!notifying()) return;
    const thread = document.getElementById("thread-title");
    try {
      const n = new Notification("Answer " + how + (thread ? " · " + thread.textContent.trim() : ""), {
        body: start, tag: "weft:" + location.pathname,
      });
      n.addEventListener("click", () => { window.focus(); n.close(); });
    } catch {
      // Chrome on Android only notifies through a service worker; the
      // title still says it.
    }
  };
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible" && unseen > 0) {
      unseen = 0;
      document.title = plainTitle;
    }
  });

  // Notifications are opt-in per browser: Settings' button asks for the
  // permission (only on that click) and keeps the choice in localStorage.
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
    const button = event.target.closest && event.target.closest("[data-notify-toggle]");
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
