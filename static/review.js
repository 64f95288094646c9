// The reviewer site's keyboard: 1–9 pick a verdict, Enter submits it, j/k
// move through the queue, ? lists the shortcuts. Everything also works
// without it: the verdicts are plain submit buttons and the links are links.
"use strict";

(() => {
  let picked = null;

  // typing reports whether the key went to a text field, where letters and
  // digits are text, not shortcuts.
  const typing = (el) => el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));

  function pick(button) {
    for (const b of document.querySelectorAll("[data-shortcut]")) b.setAttribute("aria-pressed", "false");
    picked = button;
    button.setAttribute("aria-pressed", "true");
    button.focus();
  }

  function go(selector) {
    const link = document.querySelector(selector);
    if (link) link.click();
  }

  document.addEventListener("keydown", (event) => {
    if (event.altKey || event.metaKey) return;
    const inField = typing(event.target);
    if (event.key === "Enter" && picked && document.contains(picked) && (event.ctrlKey || !inField)) {
      event.preventDefault();
      picked.click();
      return;
    }
    if (inField || event.ctrlKey) return;
    if (/^[1-9]$/.test(event.key)) {
      const button = document.querySelector(`[data-shortcut="${event.key}"]`);
      if (button) {
        event.preventDefault();
        pick(button);
      }
    } else if (event.key === "j") {
      go("[data-nav-next]");
    } else if (event.key === "k") {
      go("[data-nav-prev]");
    } else if (event.key === "?") {
      const dialog = document.getElementById("shortcuts");
      if (dialog && typeof dialog.showModal === "function" && !dialog.open) dialog.showModal();
    }
  });

  // A new task swapped in starts with nothing picked.
  document.addEventListener("htmx:afterSwap", () => { picked = null; });
})();
