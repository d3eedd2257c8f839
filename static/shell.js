// The shell (see app.js for how the scripts are split): the theme toggle
// and, on a narrow window, the sidebar drawer.
(() => {
  "use strict";

  // Theme: the toggle ([data-testid=theme-toggle], aria-pressed = dark)
  // flips between light and dark. A choice equal to the system's scheme is
  // not stored, so toggling twice follows the system again; theme.js
  // applies a stored one before the first paint, and another tab's change
  // arrives through the storage event.
  const KEY = "weft:theme";
  const root = document.documentElement;
  const systemDark = window.matchMedia("(prefers-color-scheme: dark)");
  const isDark = () => (root.dataset.theme || (systemDark.matches ? "dark" : "light")) === "dark";
  const showTheme = () => {
    document.querySelectorAll('[data-testid="theme-toggle"]').forEach((b) => b.setAttribute("aria-pressed", String(isDark())));
  };
  const setTheme = (dark) => {
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
  window.addEventListener("storage", (event) => {
    if (event.key !== KEY) return;
    if (event.newValue === "light" || event.newValue === "dark") {
      root.dataset.theme = event.newValue;
    } else {
      delete root.dataset.theme;
    }
    showTheme();
  });
  showTheme();

  // Drawer: .app[data-drawer] is "open" or "closed"; app.css shows it as a
  // drawer only below its phone breakpoint (keep the width in step). While
  // it is open the page behind it is inert (the keyboard stays in the
  // drawer); opening moves the focus into it; Esc, the scrim or the close
  // button shut it and bring the focus back to the menu button, and so do
  // a window grown past the breakpoint and a page restored from the
  // back/forward cache.
  const phone = window.matchMedia("(max-width: 860px)");
  const app = () => document.querySelector(".app");
  const isOpen = () => app()?.dataset.drawer === "open";
  const setDrawer = (open) => {
    const shell = app();
    if (!shell) return;
    shell.dataset.drawer = open ? "open" : "closed";
    shell.querySelectorAll(":scope > .main, :scope > .topbar").forEach((el) => { el.inert = open; });
    const button = document.querySelector("[data-drawer-open]");
    if (button) button.setAttribute("aria-expanded", String(open));
    if (open) {
      document.querySelector("#sidebar .drawer-close")?.focus();
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
  // Capture phase: before the composer's Esc-stops-the-answer (app.js).
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && isOpen()) {
      event.preventDefault();
      event.stopImmediatePropagation();
      setDrawer(false);
    }
  }, true);
  window.addEventListener("pageshow", () => { if (isOpen()) setDrawer(false); });
  phone.addEventListener("change", () => { if (!phone.matches && isOpen()) setDrawer(false); });
})();
