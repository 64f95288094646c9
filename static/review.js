// The reviewer site's keyboard: 1–9 pick a verdict, / finds any verdict by
// name, e edits the task's action, Enter submits the pick (Ctrl+Enter from
// the rationale), Escape leaves a text field, u or Escape go back to the
// queue, j/k move through it, x marks a task in the queue to decide
// together, ? lists the shortcuts. Everything also works without it: the verdicts
// are plain submit buttons and the links are links.
"use strict";

(() => {
  // The pick lives in the page, not in a variable: it is the verdict button
  // marked aria-pressed. Only a new desk (the next task, swapped in) has
  // fresh buttons and so no pick; other swaps, such as the navigation's
  // badge refreshing itself, leave it alone.
  const desk = () => document.getElementById("review");
  const form = () => desk()?.querySelector("form[data-testid=verdict-form]") || null;
  const verdictButtons = () => [...(form()?.querySelectorAll("button[name=verdict]") || [])];
  const picked = () => verdictButtons().find((b) => b.getAttribute("aria-pressed") === "true") || null;
  const filterInput = () => form()?.querySelector("[data-verdict-filter]") || null;

  // typing reports whether the key went to a text field, where letters and
  // digits are text, not shortcuts.
  const typing = (el) => !!el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
  // control reports whether Enter on el does something of its own (follows
  // a link, presses a button, opens a disclosure).
  const control = (el) => !!el && /^(A|BUTTON|SUMMARY)$/.test(el.tagName);

  // say shows a message in the desk's status line, which screen readers
  // announce (role=status).
  function say(message) {
    const status = desk()?.querySelector("[data-desk-status]");
    if (status) status.textContent = message;
  }

  // keys names the number keys of the verdicts: "1", "1–4", "1–9".
  function keys() {
    const n = Math.min(verdictButtons().length, 9);
    return n === 1 ? "1" : `1–${n}`;
  }

  function pick(button) {
    for (const b of verdictButtons()) b.setAttribute("aria-pressed", b === button ? "true" : "false");
    clearFilter();
    button.focus();
    say(`Picked “${button.value}”. Press Enter to submit it.`);
  }

  function submitPick() {
    const f = form();
    if (!f) return;
    // A decision is already on its way; a second one would only be refused.
    if (f.classList.contains("htmx-request")) return;
    const button = picked();
    if (button) {
      button.click();
      return;
    }
    const more = verdictButtons().length > 9 ? ", or / to find one by name" : "";
    say(`Nothing is picked yet. Press ${keys()} to pick a verdict${more}, then Enter.`);
  }

  function pickByNumber(key) {
    const buttons = verdictButtons();
    if (buttons.length === 0) return false;
    const button = form().querySelector(`button[name=verdict][data-shortcut="${key}"]`);
    if (button) {
      pick(button);
    } else if (key === "0" && buttons.length > 9) {
      say("Verdicts past the ninth have no number: press / and type a few letters of the verdict.");
    } else {
      say(`There is no verdict ${key} here. This task has ${buttons.length === 1 ? "one verdict" : `${buttons.length} verdicts`}: press ${keys()}.`);
    }
    return true;
  }

  // The finder (tasks with more than nine verdicts) narrows the verdict
  // buttons to those whose name holds what was typed; Enter picks the best
  // match: the exact name, else the first that starts with it, else the
  // first that holds it.
  function bestMatch(query) {
    const q = query.trim().toLowerCase();
    const visible = verdictButtons().filter((b) => !b.classList.contains("hidden"));
    if (q === "" || visible.length === 0) return null;
    return visible.find((b) => b.value.toLowerCase() === q)
      || visible.find((b) => b.value.toLowerCase().startsWith(q))
      || visible[0];
  }

  function filterVerdicts(query) {
    const q = query.trim().toLowerCase();
    let shown = 0;
    for (const b of verdictButtons()) {
      const match = q === "" || b.value.toLowerCase().includes(q);
      b.classList.toggle("hidden", !match);
      if (match) shown++;
    }
    if (q === "") {
      say("");
    } else if (shown === 0) {
      say(`No verdict holds “${query.trim()}”.`);
    } else {
      say(`${shown} ${shown === 1 ? "verdict matches" : "verdicts match"}. Enter picks “${bestMatch(query).value}”.`);
    }
  }

  function clearFilter() {
    const input = filterInput();
    if (!input || input.value === "") return;
    input.value = "";
    for (const b of verdictButtons()) b.classList.remove("hidden");
  }

  function openFinder() {
    const input = filterInput();
    if (input) {
      input.focus();
      input.select();
    } else if (verdictButtons().length > 0) {
      say(`Every verdict here has a number: press ${keys()}.`);
    }
  }

  // leaving is true right after a leaving key was refused because a
  // rationale was typed; the very next leaving key leaves.
  let leaving = false;

  // leave follows the link matched by selector, unless that would lose a
  // typed rationale: then it asks for a second press first (again).
  function leave(selector, again) {
    const link = document.querySelector(selector);
    if (!link) return;
    if (keepRationale(again)) return;
    if (link.tagName === "FORM") link.requestSubmit();
    else link.click();
  }

  // keepRationale reports whether leaving now would lose a typed rationale,
  // and then asks for a second press first.
  function keepRationale(again) {
    const rationale = form()?.querySelector("textarea[name=rationale]");
    if (rationale && rationale.value.trim() !== "" && !again) {
      leaving = true;
      say("Your rationale is not sent yet. Press the key again to leave this task without deciding it.");
      return true;
    }
    return false;
  }

  document.addEventListener("keydown", (event) => {
    if (event.defaultPrevented || event.altKey || event.metaKey || event.isComposing) return;
    // An open dialog (the shortcuts list) has keys of its own.
    if (document.querySelector("dialog[open]")) return;
    const target = event.target;
    const inField = typing(target);
    const inFinder = inField && target.matches("[data-verdict-filter]");
    const again = leaving;
    leaving = false;

    if (event.key === "Escape") {
      if (inFinder) {
        event.preventDefault();
        clearFilter();
        say("");
        target.blur();
      } else if (inField) {
        // Leave the field so the shortcuts work again; what was typed stays.
        event.preventDefault();
        target.blur();
      } else if (!event.ctrlKey && !event.shiftKey) {
        leave("[data-nav-up]", again);
      }
      return;
    }
    if (event.key === "Enter") {
      if (inFinder) {
        event.preventDefault();
        const best = bestMatch(target.value);
        if (best) pick(best);
        else say(target.value.trim() === "" ? "Type a few letters of a verdict." : `No verdict holds “${target.value.trim()}”.`);
        return;
      }
      if (inField && !event.ctrlKey && target.closest("[data-action-edit]")) {
        // Enter in an edit of the action decides nothing: pick a verdict.
        event.preventDefault();
        say(`Your edit is kept. Press Escape, then ${keys()} to pick a verdict and Enter to submit it.`);
        return;
      }
      if (inField && !event.ctrlKey) return;
      if (!inField && !event.ctrlKey && control(target)) return;
      if (!form()) return;
      event.preventDefault();
      submitPick();
      return;
    }
    if (event.key === "x" && !event.ctrlKey && target.matches?.("[data-bulk-mark]")) {
      // A mark's box has the focus: x is Space's twin there.
      event.preventDefault();
      toggleMark();
      return;
    }
    if (inField || event.ctrlKey) return;
    if (/^[0-9]$/.test(event.key)) {
      if (pickByNumber(event.key)) event.preventDefault();
    } else if (event.key === "/") {
      if (verdictButtons().length > 0) {
        event.preventDefault();
        openFinder();
      }
    } else if (event.key === "u") {
      leave("[data-nav-up]", again);
    } else if (event.key === "j") {
      leave("[data-nav-next]", again);
    } else if (event.key === "k") {
      leave("[data-nav-prev]", again);
    } else if (event.key === "s") {
      leave("[data-skip-form]", again);
    } else if (event.key === "e") {
      const edit = form()?.querySelector("[data-action-edit]");
      if (edit) {
        event.preventDefault();
        edit.open = true;
        edit.querySelector("input, select, textarea")?.focus();
        say("Edit the action; Escape leaves a field, then pick a verdict.");
      }
    } else if (event.key === "x") {
      if (toggleMark()) event.preventDefault();
    } else if (event.key === "?") {
      const dialog = document.getElementById("shortcuts");
      if (dialog && typeof dialog.showModal === "function") dialog.showModal();
    }
  });

  // A key handled above types no character and presses nothing either.
  // Browsers drop the keypress of a keydown whose default was prevented;
  // this makes sure of it where the keypress comes anyway (synthesized
  // keys): the Enter that picked in the finder must not also press the
  // picked button, and / must not land in the finder it opened.
  let handledKey = null;
  document.addEventListener("keydown", (event) => { handledKey = event.defaultPrevented ? event.key : null; });
  document.addEventListener("keypress", (event) => {
    if (event.key === handledKey) event.preventDefault();
    handledKey = null;
  }, true);

  document.addEventListener("input", (event) => {
    if (event.target.matches?.("[data-verdict-filter]")) filterVerdicts(event.target.value);
  });

  // prepare readies a desk: the verdict buttons become toggle buttons that
  // show the pick, and the finder, useless without this script, appears.
  function prepare() {
    for (const b of verdictButtons()) {
      if (!b.hasAttribute("aria-pressed")) b.setAttribute("aria-pressed", "false");
    }
    const finder = form()?.querySelector("[data-verdict-finder]");
    if (finder) finder.classList.remove("hidden");
    fitBar();
  }

  // The verdict bar sticks to the bottom of the window so the verdicts are
  // in reach however long the task, unless it would cover more than
  // maxBarShare of the window (many verdicts on a phone: 12 took 462 of
  // 844 px): then it stays where it is, under the task, and the task keeps
  // the window to be read.
  const maxBarShare = 0.45;
  function fitBar() {
    const f = form();
    if (!f) return;
    f.classList.add("sticky");
    f.classList.toggle("sticky", f.offsetHeight <= window.innerHeight * maxBarShare);
  }
  window.addEventListener("resize", fitBar);

  // What has the focus is never hidden under the sticky bar (WCAG 2.4.11):
  // once the browser has scrolled it into view, it is scrolled on until it
  // clears the bar's top.
  function keepClear(el) {
    const f = form();
    if (!f || !f.classList.contains("sticky") || f.contains(el) || !el.getBoundingClientRect) return;
    const bar = f.getBoundingClientRect();
    const r = el.getBoundingClientRect();
    if (r.height === 0 || r.bottom <= bar.top || r.top >= bar.bottom) return;
    window.scrollBy(0, r.bottom - bar.top + 8);
  }
  document.addEventListener("focusin", (event) => {
    const el = event.target;
    keepClear(el);
    requestAnimationFrame(() => { if (document.activeElement === el) keepClear(el); });
  });

  // After a decision the next task's desk replaces this one. htmx would put
  // the focus back into the rationale (the field of the same id), where 1
  // types "1"; the focus goes to the new task itself instead (its card,
  // which starts with its heading), so the shortcuts work at once.
  let shownDesk = desk();
  function deskChanged() {
    const current = desk();
    if (!current || current === shownDesk) return false;
    shownDesk = current;
    leaving = false;
    prepare();
    // The tab's title names the task, as its heading does.
    const heading = current.querySelector("h1")?.textContent.trim();
    if (heading) document.title = document.title.replace(/^.*( · Arbiter)$/, `${heading}$1`);
    return true;
  }
  document.addEventListener("htmx:afterSettle", () => {
    if (!deskChanged()) return;
    const task = shownDesk.querySelector("article") || shownDesk;
    if (!task.hasAttribute("tabindex")) task.setAttribute("tabindex", "-1");
    task.focus({ preventScroll: true });
  });
  document.addEventListener("htmx:historyRestore", deskChanged);

  // A page shown again from the back-forward cache shows the task as it was
  // when it was left, perhaps open though it was decided since: load it
  // afresh. (Desk pages are no-store and keep no htmx history snapshot, so
  // Back otherwise asks the server already.)
  window.addEventListener("pageshow", (event) => {
    if (event.persisted && form()) window.location.reload();
  });

  // The queue refreshes itself every few seconds; its status line (a live
  // region outside the list) says only what changed: how many wait now,
  // when that changed.
  const queueCount = () => document.querySelector("#queue [data-testid=queue-count]")?.textContent.trim() ?? null;
  let shownCount = queueCount();
  document.addEventListener("htmx:afterSettle", () => {
    const status = document.querySelector("[data-queue-status]");
    const count = queueCount();
    if (!status || count === null || count === shownCount) return;
    const before = Number.parseInt(shownCount, 10);
    const now = Number.parseInt(count, 10);
    shownCount = count;
    const change = now > before ? `${now - before} new` : now < before ? `${before - now} fewer` : "";
    status.textContent = `${count} waiting` + (change ? ` (${change})` : "") + ".";
  });

  // Bulk decisions: x marks the queue's task that has the focus (or the
  // first), its box the same. The marks are the values of checked boxes,
  // kept here as well, since the queue's list redraws itself every few
  // seconds; a task that left the list leaves the marks, so that only
  // tasks the reviewer sees listed are decided. The bar for the marked
  // tasks shows once one is marked.
  const marked = new Set();
  const markBoxes = () => [...document.querySelectorAll("#queue [data-bulk-mark]")];
  const bulkForm = () => document.querySelector("[data-bulk-form]");

  function showMarks() {
    const boxes = markBoxes();
    const listed = new Set(boxes.map((b) => b.value));
    for (const v of [...marked]) if (!listed.has(v)) marked.delete(v);
    for (const b of boxes) b.checked = marked.has(b.value);
    const bar = bulkForm();
    if (!bar) return;
    bar.classList.toggle("hidden", marked.size === 0);
    const count = bar.querySelector("[data-bulk-count]");
    if (count) count.textContent = `${marked.size} ${marked.size === 1 ? "task" : "tasks"} marked`;
    const submit = bar.querySelector("button[type=submit]");
    if (submit) submit.textContent = `Decide ${marked.size} ${marked.size === 1 ? "task" : "tasks"}…`;
  }

  function sayQueue(message) {
    const status = document.querySelector("[data-queue-status]");
    if (status) status.textContent = message;
  }

  // toggleMark marks or unmarks the row holding the focus, or the first
  // row that may be marked; it reports whether the queue has one.
  function toggleMark() {
    const boxes = markBoxes();
    if (boxes.length === 0) return false;
    const row = document.activeElement?.closest?.("#queue li");
    const box = row?.querySelector("[data-bulk-mark]") || boxes[0];
    box.checked = !box.checked;
    box.dispatchEvent(new Event("change", { bubbles: true }));
    (box.closest("li")?.querySelector("a") || box).focus();
    return true;
  }

  document.addEventListener("change", (event) => {
    const box = event.target;
    if (!box.matches?.("[data-bulk-mark]")) return;
    if (box.checked) marked.add(box.value);
    else marked.delete(box.value);
    showMarks();
    const what = box.getAttribute("aria-label")?.replace(/^Mark /, "").replace(/ to decide with others$/, "") || "the task";
    sayQueue(`${box.checked ? "Marked" : "Unmarked"} ${what}: ${marked.size} marked.`);
  });
  document.addEventListener("htmx:afterSettle", showMarks);
  for (const b of markBoxes()) if (b.checked) marked.add(b.value);
  showMarks();

  prepare();
})();
