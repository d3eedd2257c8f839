// Files for the composer and for knowledge bases (see app.js for how the
// scripts are split). Files dragged over a form that takes them mark it
// "dropping"; dropped on a knowledge base's upload form (form[data-drop])
// they are sent at once; dropped on or pasted into the composer
// (form[data-drop-files]) they join its file input and go with the
// message. The composer lists the chosen files, and "Attach to next
// message" on a generated image ([data-attach-media]) adds it.
(() => {
  "use strict";

  // acceptFileDrops hands files dropped on a form matching selector to
  // onFiles(form, files), marking the form while files are over it.
  const acceptFileDrops = (selector, onFiles) => {
    const target = (event) => (event.target instanceof Element ? event.target.closest(selector) : null);
    const carriesFiles = (event) => event.dataTransfer && [...event.dataTransfer.types].includes("Files");
    ["dragenter", "dragover"].forEach((type) => document.addEventListener(type, (event) => {
      const form = target(event);
      if (!form || !carriesFiles(event)) return;
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
      onFiles(form, [...event.dataTransfer.files]);
    });
  };

  acceptFileDrops("form[data-drop]", (form, files) => {
    const input = form.querySelector('input[type="file"]');
    if (!input) return;
    const dt = new DataTransfer();
    files.forEach((f) => dt.items.add(f));
    input.files = dt.files;
    form.requestSubmit();
  });

  const fileInput = (form) => form.querySelector('input[type="file"][name="files"]');

  const listFiles = (form) => {
    const input = fileInput(form);
    const list = form.querySelector("[data-file-list]");
    if (input && list) list.textContent = [...input.files].map((f) => f.name).join(", ");
  };

  const addFiles = (form, files) => {
    const input = fileInput(form);
    if (!input || files.length === 0) return;
    const dt = new DataTransfer();
    [...input.files, ...files].forEach((f) => dt.items.add(f));
    input.files = dt.files;
    listFiles(form);
  };

  acceptFileDrops("form[data-drop-files]", addFiles);
  document.addEventListener("change", (event) => {
    const input = event.target;
    if (input instanceof HTMLInputElement && input.form && input.matches('form.composer input[name="files"]')) listFiles(input.form);
  });
  document.addEventListener("paste", (event) => {
    const form = event.target instanceof Element ? event.target.closest("form.composer") : null;
    if (!form || !event.clipboardData || event.clipboardData.files.length === 0) return;
    event.preventDefault();
    addFiles(form, [...event.clipboardData.files]);
  });

  // A sent message's files are gone with it: app.js resets the composer
  // after an accepted send, and the reset empties its file input.
  document.addEventListener("reset", (event) => {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.matches("form.composer")) return;
    const list = form.querySelector("[data-file-list]");
    if (list) list.textContent = "";
    form.querySelectorAll("#composer-media > *").forEach((el) => el.remove());
  });

  document.addEventListener("click", (event) => {
    const button = event.target instanceof Element ? event.target.closest("[data-attach-media]") : null;
    const form = document.querySelector("form.composer");
    const box = form && form.querySelector("#composer-media");
    if (!button || !box) return;
    const id = button.dataset.attachMedia;
    if (box.querySelector(`input[value="${CSS.escape(id)}"]`)) return;
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
    remove.setAttribute("aria-label", "Do not attach image " + id);
    remove.addEventListener("click", () => chip.remove());
    chip.append(input, remove);
    box.append(chip);
  });
})();
