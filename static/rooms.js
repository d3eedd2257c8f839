// Rooms, issue 20 (see app.js for how the scripts are split): the room's
// one stream, the composer's mentions and the side panel's disclosure.
(() => {
  "use strict";

  // Appended messages the page already shows: live.js (shared with a
  // thread's live watch).

  // Mentions. The composer holds the room's agents twice: as suggestions
  // (views.MentionSuggestions, [data-mention-list], hidden) that typing
  // "@" and the start of a name shows, filtered; and as chips under the
  // message. A click on either, or Tab or Enter while suggestions show,
  // puts "@Name " in place of what was typed (or at the caret); Escape
  // hides the suggestions.
  const listOf = (box) => box.form && box.form.querySelector("[data-mention-list]");
  const typed = (box) => {
    const m = /(^|[^\w@])@([A-Za-z0-9_-]*)$/.exec(box.value.slice(0, box.selectionStart));
    return m ? m[2] : null;
  };
  const hide = (list) => { if (list) list.hidden = true; };
  const update = (box) => {
    const list = listOf(box);
    if (!list) return;
    const prefix = typed(box);
    let any = false;
    list.querySelectorAll("[data-mention]").forEach((b) => {
      b.hidden = prefix === null || !b.dataset.mention.toLowerCase().startsWith(prefix.toLowerCase());
      any = any || !b.hidden;
    });
    list.hidden = !any;
  };
  const insert = (box, name) => {
    const prefix = typed(box);
    const end = box.selectionStart;
    let at = end;
    let text = "@" + name + " ";
    if (prefix !== null) {
      at = end - prefix.length - 1; // the "@"
    } else if (at > 0 && !/\s/.test(box.value[at - 1])) {
      text = " " + text;
    }
    box.setRangeText(text, at, end, "end");
    box.focus();
    hide(listOf(box));
    box.dispatchEvent(new Event("input", { bubbles: true })); // the draft keeps it
  };
  document.addEventListener("input", (event) => {
    if (event.target instanceof HTMLTextAreaElement) update(event.target);
  });
  document.addEventListener("click", (event) => {
    const b = event.target instanceof Element ? event.target.closest("[data-mention]") : null;
    const box = b && b.form && b.form.querySelector("textarea");
    if (box) insert(box, b.dataset.mention);
  });
  // Capture phase: before the composer's Enter-sends and Esc-stops (app.js).
  document.addEventListener("keydown", (event) => {
    const box = event.target;
    if (!(box instanceof HTMLTextAreaElement)) return;
    const list = listOf(box);
    if (!list || list.hidden || event.isComposing) return;
    if (event.key === "Escape") {
      hide(list);
    } else if (event.key === "Tab" || event.key === "Enter") {
      const first = [...list.querySelectorAll("[data-mention]")].find((b) => !b.hidden);
      if (!first) return;
      insert(box, first.dataset.mention);
    } else {
      return;
    }
    event.preventDefault();
    event.stopImmediatePropagation();
  }, true);

  // The side panel (members, agents, settings: details[data-room-side]) is
  // a column beside the conversation on a wide window, always open; on a
  // phone it is a disclosure above the conversation, shut unless one of
  // its forms came back refused. Keep the width in step with app.css.
  const wide = window.matchMedia("(min-width: 861px)");
  const fitSide = () => {
    document.querySelectorAll("details[data-room-side]").forEach((side) => {
      side.open = wide.matches || Boolean(side.querySelector('[data-testid="error"]'));
    });
  };
  wide.addEventListener("change", fitSide);
  fitSide();
})();
