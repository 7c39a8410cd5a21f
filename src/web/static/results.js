// @ts-check
/**
 * The results list's live rows: on every `run.finished` event of the portal's
 * stream, ask the server for the row of that result under the page's filter
 * (`/app/results/row`, 204 when it does not match) and put it at the top of
 * the table. The server renders and filters it exactly as the list, so the
 * page and its live rows can never disagree about the grammar.
 */

const table = /** @type {HTMLTableElement | null} */ (document.getElementById('results'));
const tbody = table?.tBodies[0];

/** @param {string} resultId */
async function addRow(resultId) {
  if (!table || !tbody) return;
  if (tbody.querySelector(`tr[data-result-id="${CSS.escape(resultId)}"]`)) return;
  const q = new URLSearchParams({ filter: table.dataset.filter ?? '', tz: table.dataset.tz ?? '', result_id: resultId });
  const res = await fetch(`/app/results/row?${q}`, { credentials: 'same-origin', headers: { Accept: 'text/html' } });
  if (res.status !== 200) return; // 204: not in this list
  const doc = new DOMParser().parseFromString(await res.text(), 'text/html');
  const row = doc.querySelector('tr[data-result-id]');
  if (!row || tbody.querySelector(`tr[data-result-id="${CSS.escape(resultId)}"]`)) return;
  row.classList.add('new-row');
  tbody.insertBefore(document.importNode(row, true), tbody.firstChild);
  document.getElementById('no-results')?.remove();
  const count = document.getElementById('results-count');
  if (count && /^\d+ results?\.$/.test(count.textContent ?? '')) {
    const n = tbody.rows.length;
    count.textContent = `${n} result${n === 1 ? '' : 's'}.`;
  }
}

if (table) {
  const events = new EventSource('/app/events');
  events.addEventListener('run.finished', (e) => {
    /** @type {{ data?: { result_id?: unknown } }} */
    const ev = JSON.parse(/** @type {MessageEvent<string>} */ (e).data);
    const id = ev.data?.result_id;
    if (typeof id === 'string') addRow(id).catch((err) => console.warn('results: could not add the new row', err));
  });
  // Tests (and people) can tell that rows will now arrive live.
  events.addEventListener('open', () => {
    table.dataset.live = 'on';
  });
}
