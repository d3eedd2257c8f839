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

  // Stick to the bottom while new text arrives, unless the reader scrolled up.
  const nearBottom = () => window.innerHeight + window.scrollY >= document.body.scrollHeight - 80;
  let stick = true;
  window.addEventListener("scroll", () => { stick = nearBottom(); }, { passive: true });
  document.addEventListener("htmx:afterSwap", () => {
    if (stick) window.scrollTo(0, document.body.scrollHeight);
  });
  document.addEventListener("htmx:sseMessage", () => {
    if (stick) window.scrollTo(0, document.body.scrollHeight);
  });
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
