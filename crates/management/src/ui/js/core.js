// What every page shares: the management API client (HTTP basic credentials kept in
// sessionStorage, as RabbitMQ's UI keeps them), DOM building without innerHTML (names and
// payloads are user data), number formatting, tables and SVG line charts.

const CREDENTIALS_KEY = 'ferry.credentials';

/** An answer of the API other than 2xx: its status and RabbitMQ-style `reason`. */
export class ApiError extends Error {
  constructor(status, reason) {
    super(reason);
    this.status = status;
  }
}

/** The stored `user:password` in base64, or null when logged out. */
export function credentials() {
  return sessionStorage.getItem(CREDENTIALS_KEY);
}

/** Keeps `user`'s credentials for this browser tab (never written anywhere else). */
export function storeCredentials(user, password) {
  const bytes = new TextEncoder().encode(`${user}:${password}`);
  sessionStorage.setItem(CREDENTIALS_KEY, btoa(String.fromCharCode(...bytes)));
}

export function forgetCredentials() {
  sessionStorage.removeItem(CREDENTIALS_KEY);
}

/** `/api/` + the path segments, each percent-encoded (vhost "/" becomes "%2F"). */
export function apiPath(...segments) {
  return '/api/' + segments.map(encodeURIComponent).join('/');
}

/**
 * Calls the management API; resolves to the parsed JSON body (null when empty). Rejects
 * with an ApiError carrying the API's `reason` (or the HTTP status text).
 */
export async function api(method, path, { body, headers = {} } = {}) {
  const init = {
    method,
    headers: { Authorization: `Basic ${credentials()}`, ...headers },
    credentials: 'omit',
    cache: 'no-store',
  };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, `Ferry does not answer (${e.message})`);
  }
  const text = await response.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    // Not JSON: the status text below says what happened.
  }
  if (!response.ok) {
    const reason = (json && (json.reason || json.error)) || `${response.status} ${response.statusText}`;
    throw new ApiError(response.status, reason);
  }
  return json;
}

/**
 * Builds an element: `h('td', {class: 'num'}, '5')`. Attributes starting with "on" are
 * event listeners; children are nodes or text (null and false are skipped).
 */
export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on')) element.addEventListener(name.slice(2), value);
    else element.setAttribute(name, value === true ? '' : value);
  }
  append(element, children);
  return element;
}

function append(parent, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    parent.append(child instanceof Node ? child : String(child));
  }
}

/** A link to a page of this UI: `link('Queues', 'queues')`, `link(name, 'queue', vhost, name)`. */
export function link(text, ...route) {
  return h('a', { href: '#/' + route.map(encodeURIComponent).join('/') }, text);
}

/** An integer with thousands separators; "–" for a value the API did not give. */
export function count(value) {
  return typeof value === 'number' ? value.toLocaleString('en') : '–';
}

/** A rate per second from a `*_details` object; "–" when the API gave none. */
export function rate(details, unit = '/s') {
  return details && typeof details.rate === 'number' ? `${details.rate.toFixed(1)}${unit}` : '–';
}

/** The rate of `stats[name]` (RabbitMQ's `message_stats.NAME_details.rate`), or 0. */
export function rateOf(stats, name) {
  const details = stats && stats[`${name}_details`];
  return details && typeof details.rate === 'number' ? details.rate : 0;
}

/** Yes/no for a flag. */
export function flag(value) {
  return value ? 'yes' : 'no';
}

/**
 * A table: `columns` are `{title, cell: row => node|text, numeric}`; `rowAttributes(row)`
 * gives each <tr>'s attributes (e.g. a data-name for tests and styles).
 */
export function table(columns, rows, { empty = 'Nothing to show.', rowAttributes = () => ({}) } = {}) {
  if (rows.length === 0) return h('p', { class: 'muted empty' }, empty);
  const cellClass = (column) => (column.numeric ? 'num' : null);
  const head = h('thead', {}, h('tr', {}, columns.map((c) => h('th', { class: cellClass(c) }, c.title))));
  const body = h(
    'tbody',
    {},
    rows.map((row) => h('tr', rowAttributes(row), columns.map((c) => h('td', { class: cellClass(c) }, c.cell(row))))),
  );
  // A wide table scrolls inside its box, so a narrow window keeps the page's own width.
  return h('div', { class: 'table-box' }, h('table', {}, head, body));
}

/**
 * One page of a long list: `paged(rows, state, size, redraw)` answers `{shown, pager}`,
 * the rows of page `state.page` (kept by the caller across refreshes, and brought back
 * within range when the list shrinks) and the Previous / Next controls, null when the list
 * fits on one page.
 */
export function paged(rows, state, size, redraw) {
  const pages = Math.max(1, Math.ceil(rows.length / size));
  state.page = Math.min(Math.max(0, state.page || 0), pages - 1);
  const shown = rows.slice(state.page * size, (state.page + 1) * size);
  if (pages === 1) return { shown, pager: null };
  const go = (page) => () => {
    state.page = page;
    redraw();
  };
  const pager = h(
    'div',
    { class: 'pager' },
    h('button', { type: 'button', class: 'plain', 'data-action': 'previous', disabled: state.page === 0, onclick: go(state.page - 1) }, '‹ Previous'),
    h('span', { class: 'muted page-of' }, `${count(state.page * size + 1)}–${count(state.page * size + shown.length)} of ${count(rows.length)}`),
    h('button', { type: 'button', class: 'plain', 'data-action': 'next', disabled: state.page === pages - 1, onclick: go(state.page + 1) }, 'Next ›'),
  );
  return { shown, pager };
}

/** A byte count in B, KiB, MiB, GiB or TiB; "–" for a value the API did not give. */
export function bytes(value) {
  if (typeof value !== 'number') return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let unit = 0;
  let scaled = value;
  while (scaled >= 1024 && unit < units.length - 1) {
    scaled /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${scaled.toFixed(1)} ${units[unit]}`;
}

/**
 * `promise`, or null when the API refuses it with 401 "Not monitor user" (a view for
 * users tagged monitoring or administrator): a page shows what the user may see rather
 * than logging them out.
 */
export async function monitored(promise) {
  try {
    return await promise;
  } catch (e) {
    if (e instanceof ApiError && e.status === 401 && /^Not (monitor|administrator) user$/.test(e.message)) return null;
    throw e;
  }
}

/** Says `text` in the status element `element`, in the error style when `error`. */
export function say(element, text, error = false) {
  element.textContent = text;
  element.className = error ? 'result error' : 'result';
}

/** Asks the shell to refresh the page now (after an action, so its numbers follow). */
export function refreshNow() {
  window.dispatchEvent(new Event('ferry:refresh'));
}

/** A definition list of `[term, value]` pairs. */
export function details(pairs) {
  return h('dl', { class: 'details' }, pairs.map(([term, value]) => [h('dt', {}, term), h('dd', {}, value)]));
}

/**
 * A button that acts on its second click within 5 s (the first asks "Click again to …"),
 * so a destructive action needs no modal dialog to script around. `action` is awaited;
 * the button is disabled meanwhile.
 */
export function confirmButton(attributes, label, action) {
  const button = h('button', { type: 'button', class: 'danger', ...attributes }, label);
  let armed = null;
  button.addEventListener('click', async () => {
    if (!armed) {
      button.textContent = `Click again to ${label.toLowerCase()}`;
      armed = setTimeout(() => {
        armed = null;
        button.textContent = label;
      }, 5000);
      return;
    }
    clearTimeout(armed);
    armed = null;
    button.textContent = label;
    button.disabled = true;
    try {
      await action();
    } finally {
      button.disabled = false;
    }
  });
  return button;
}

/** Replaces `element`'s children. */
export function replace(element, ...children) {
  element.replaceChildren();
  append(element, children);
}

const SVG = 'http://www.w3.org/2000/svg';

function svg(tag, attributes = {}, ...children) {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, value);
  for (const child of children) element.append(child);
  return element;
}

/** The smallest of 1, 2, 5 × 10^k at or above `value` (a readable axis top). */
function niceCeiling(value) {
  if (!(value > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  return [1, 2, 5, 10].map((m) => m * power).find((top) => top >= value);
}

/**
 * A line chart in SVG of `series` (`{name, color, points: [[timeMs, value], …]}`) over the
 * last `windowMs`, with a y axis from 0 to a round top and a legend of the latest values
 * (written by `format`, followed by `unit`).
 */
export function lineChart(series, { windowMs, unit = '', format = (v) => v.toFixed(1) }) {
  const width = 600;
  const height = 180;
  const left = 48;
  const bottom = 20;
  const plotWidth = width - left - 8;
  const plotHeight = height - bottom - 8;
  const now = Date.now();
  const top = niceCeiling(Math.max(0, ...series.flatMap((s) => s.points.map(([, v]) => v))));
  const x = (t) => left + plotWidth * (1 - (now - t) / windowMs);
  const y = (v) => 8 + plotHeight * (1 - v / top);
  const chart = svg('svg', { viewBox: `0 0 ${width} ${height}`, class: 'chart', role: 'img' });
  for (let i = 0; i <= 4; i++) {
    const value = (top * i) / 4;
    chart.append(
      svg('line', { x1: left, x2: width - 8, y1: y(value), y2: y(value), class: 'grid' }),
      svg('text', { x: left - 6, y: y(value) + 4, class: 'axis', 'text-anchor': 'end' }, document.createTextNode(String(Number(value.toPrecision(3))))),
    );
  }
  for (const [ago, anchor] of [[windowMs, 'start'], [windowMs / 2, 'middle'], [0, 'end']]) {
    const label = ago === 0 ? 'now' : ago < 120000 ? `-${Math.round(ago / 1000)} s` : `-${Math.round(ago / 60000)} min`;
    chart.append(svg('text', { x: x(now - ago), y: height - 4, class: 'axis', 'text-anchor': anchor }, document.createTextNode(label)));
  }
  for (const s of series) {
    const visible = s.points.filter(([t]) => now - t <= windowMs);
    if (visible.length === 0) continue;
    const path = visible.map(([t, v], i) => `${i ? 'L' : 'M'}${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(' ');
    chart.append(svg('path', { d: path, class: 'line', stroke: s.color }));
  }
  const legend = h(
    'ul',
    { class: 'legend' },
    series.map((s) => {
      const last = s.points.at(-1);
      // Through the CSSOM: the page's Content-Security-Policy refuses style attributes.
      const swatch = h('span', { class: 'swatch' });
      swatch.style.background = s.color;
      return h('li', {}, swatch, `${s.name} `, h('strong', {}, last ? `${format(last[1])}${unit}` : '–'));
    }),
  );
  return h('div', { class: 'chart-box' }, chart, legend);
}
