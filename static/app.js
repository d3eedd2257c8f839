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
