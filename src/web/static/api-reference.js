// @ts-check
/**
 * The API reference (`/app/api`) folds each endpoint and schema in a
 * `<details>`: following a link to one (`#schema-Job`, or a URL with that
 * fragment) opens it and its enclosing ones, then shows it. Without this
 * script the page still reads; the folded parts open by a click.
 */

function openTarget() {
  const id = decodeURIComponent(location.hash.slice(1));
  if (!id) return;
  const target = document.getElementById(id);
  if (!target) return;
  for (let el = /** @type {HTMLElement | null} */ (target); el; el = el.parentElement) {
    if (el instanceof HTMLDetailsElement) el.open = true;
  }
  target.scrollIntoView();
}

window.addEventListener('hashchange', openTarget);
openTarget();
