// Arbiter's one script: progressive enhancement only; every page works
// without it. The Content-Security-Policy allows no inline script, so
// behaviour hangs off data- attributes.
"use strict";

// A button with data-copy="ID" copies the value (or text) of the element
// with that id and says so in its label for a moment.
document.addEventListener("click", async (event) => {
  const button = event.target.closest("[data-copy]");
  if (!button) return;
  const source = document.getElementById(button.dataset.copy);
  if (!source) return;
  const text = "value" in source ? source.value : source.textContent;
  const label = button.querySelector("[data-copy-label]") || button;
  const original = label.textContent;
  try {
    await navigator.clipboard.writeText(text);
    label.textContent = "Copied";
  } catch {
    // Clipboard access refused (an insecure origin, say): select the text
    // so the person can copy it by hand.
    if (source.select) source.select();
    label.textContent = "Press Ctrl+C to copy";
  }
  setTimeout(() => { label.textContent = original; }, 2000);
});

// The copy button is hidden until the script runs, as it needs it.
document.addEventListener("DOMContentLoaded", showCopyButtons);
document.addEventListener("htmx:afterSettle", showCopyButtons);
function showCopyButtons() {
  for (const el of document.querySelectorAll("[data-copy].hidden")) el.classList.remove("hidden");
}

// A <dialog> opener: a link with data-dialog="ID" opens that dialog instead
// of navigating to its confirmation page.
document.addEventListener("click", (event) => {
  const opener = event.target.closest("[data-dialog]");
  if (!opener) return;
  const dialog = document.getElementById(opener.dataset.dialog);
  if (!dialog || typeof dialog.showModal !== "function") return;
  event.preventDefault();
  dialog.showModal();
});
document.addEventListener("click", (event) => {
  const closer = event.target.closest("[data-dialog-close]");
  const dialog = closer?.closest("dialog");
  if (!dialog) return;
  event.preventDefault();
  dialog.close();
});
