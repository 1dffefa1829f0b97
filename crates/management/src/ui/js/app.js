// The shell of the management UI: login, the navigation bar, the hash router
// (`#/PAGE/ARG/…`) and the refresh loop. Pages live in js/pages/, one module each, listed
// in js/pages/index.js; a page is `{route, title, nav, mount(view, args)}` where `mount`
// draws into `view` and returns `{refresh}` (called every refresh interval while the page
// is shown).

import { api, ApiError, credentials, forgetCredentials, h, replace, storeCredentials } from './core.js';
import pages from './pages/index.js';

const byId = (id) => document.getElementById(id);

/** The page shown now, its handle, the refresh timer and the refresh in flight. */
const state = { page: null, handle: null, timer: null, inFlight: null, again: false, first: false };

/**
 * How soon a page is refreshed a second time. The API's rates are the change between its
 * readings, and a page's first request is often the first reading: asking again a second
 * later gives the page real rates at once instead of 0.0/s until the next interval.
 */
const SECOND_REFRESH_MS = 1000;

function showLogin(reason = '') {
  stopRefresh();
  byId('app').hidden = true;
  byId('login').hidden = false;
  byId('login-error').textContent = reason;
  byId('login-user').focus();
}

/** Asks /api/whoami with the stored credentials; shows the app when they are good. */
async function enter() {
  try {
    const me = await api('GET', '/api/whoami');
    byId('whoami').textContent = `User: ${me.name}`;
    byId('login').hidden = true;
    byId('app').hidden = false;
    showProduct();
    route();
  } catch (e) {
    forgetCredentials();
    showLogin(e.message);
  }
}

async function showProduct() {
  try {
    const overview = await api('GET', '/api/overview');
    const product = overview.product_name || 'Ferry';
    const version = overview.product_version || overview.rabbitmq_version || '';
    byId('product').textContent = `${product} ${version} · ${overview.node || ''}`;
  } catch {
    // The overview page says what is wrong; the header just stays short.
  }
}

function drawNav(current) {
  const active = current && (current.navAs || current.route);
  replace(
    byId('nav'),
    pages
      .filter((p) => p.nav)
      .map((p) => h('a', { href: `#/${p.route}`, class: p.route === active ? 'active' : null, 'data-page': p.route }, p.title)),
  );
}

/** Shows the page the hash names (the first navigable page when it names none). */
function route() {
  if (!credentials()) return showLogin();
  const [name = '', ...args] = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  const page = pages.find((p) => p.route === name);
  if (!page) {
    location.replace(`#/${pages[0].route}`);
    return;
  }
  stopRefresh();
  state.page = page;
  drawNav(page);
  byId('banner').hidden = true;
  const view = byId('view');
  view.replaceChildren();
  view.dataset.page = page.route;
  document.title = `${page.title} · Ferry`;
  state.handle = page.mount(view, args);
  state.first = true;
  refresh();
}

/**
 * Refreshes the current page now, then again after the chosen interval. A refresh asked
 * for while one of the same page is in flight runs right after it.
 */
async function refresh() {
  stopRefresh();
  const handle = state.handle;
  if (!handle || !handle.refresh) return;
  if (state.inFlight === handle) {
    state.again = true;
    return;
  }
  state.inFlight = handle;
  state.again = false;
  try {
    await handle.refresh();
    if (handle === state.handle) byId('banner').hidden = true;
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      forgetCredentials();
      return showLogin(e.message);
    }
    if (handle === state.handle) {
      byId('banner').textContent = e.message;
      byId('banner').hidden = false;
    }
  } finally {
    if (state.inFlight === handle) state.inFlight = null;
  }
  if (handle !== state.handle) return;
  if (state.again) return refresh();
  const interval = Number(byId('refresh').value);
  const wait = state.first ? Math.min(interval, SECOND_REFRESH_MS) : interval;
  state.first = false;
  if (wait > 0) state.timer = setTimeout(refresh, wait);
}

function stopRefresh() {
  clearTimeout(state.timer);
  state.timer = null;
}

byId('login-form').addEventListener('submit', (event) => {
  event.preventDefault();
  byId('login-error').textContent = '';
  storeCredentials(byId('login-user').value, byId('login-password').value);
  byId('login-password').value = '';
  enter();
});
byId('logout').addEventListener('click', () => {
  forgetCredentials();
  state.handle = null;
  showLogin();
});
byId('refresh').addEventListener('change', refresh);
window.addEventListener('hashchange', route);
// Pages call this after an action (a purge, a close) so the numbers follow at once.
window.addEventListener('ferry:refresh', refresh);

if (credentials()) enter();
else showLogin();
