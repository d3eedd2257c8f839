// Weft's theme, applied before the first paint: loaded without defer in
// <head> (the CSP forbids inline script, so it is this small file). A
// stored choice ("light" or "dark", set by the theme toggle in app.js)
// becomes <html data-theme>, which overrides the system's colour scheme;
// with none stored, the stylesheet follows prefers-color-scheme.
(() => {
  "use strict";
  try {
    const theme = localStorage.getItem("weft:theme");
    if (theme === "light" || theme === "dark") document.documentElement.dataset.theme = theme;
  } catch {
    // Storage refused (privacy settings): the system's scheme it is.
  }
})();
