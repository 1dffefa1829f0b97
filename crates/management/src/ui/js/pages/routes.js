// Routes: every bridge route with its origin, state, source and destinations, the messages
// waiting in its stages and its dead letters, from /api/ferry/routes; a name links to the
// route's own page (dead letters, replay, purge); pause and resume act at once.

import { api, apiPath, count, h, link, rate, replace, table } from '../core.js';

/** An endpoint's label with its connection state (external brokers only). */
export function endpoint(e) {
  const state = e.connection === 'in_process' ? null : h('span', { class: `state state-${e.connection}`, title: e.reason || '' }, ` (${e.connection})`);
  return h('span', {}, h('code', {}, e.endpoint), state);
}

/** A route's state, with the reason of a failure as its title. */
export function routeState(r) {
  return h('span', { class: `state state-${r.state}`, title: r.reason || '' }, r.state);
}

/** The destinations' delivery rates, summed. */
function deliveredRate(r) {
  const total = r.destinations.reduce((sum, d) => sum + ((d.message_stats || {}).delivered_details || {}).rate || 0, 0);
  return rate({ rate: total });
}

/** Pause or resume, whichever applies. */
export function pauseButton(r) {
  const action = r.paused ? 'resume' : 'pause';
  return h(
    'button',
    {
      type: 'button',
      'data-action': action,
      onclick: async (event) => {
        event.target.disabled = true;
        try {
          await api('POST', apiPath('ferry', 'routes', r.name, action));
        } finally {
          window.dispatchEvent(new Event('ferry:refresh'));
        }
      },
    },
    r.paused ? 'Resume' : 'Pause',
  );
}

const COLUMNS = [
  { title: 'Name', cell: (r) => link(r.name, 'route', r.name) },
  { title: 'Origin', cell: (r) => r.origin },
  { title: 'State', cell: routeState },
  { title: 'From', cell: (r) => endpoint(r.source) },
  { title: 'To', cell: (r) => r.destinations.map((d) => h('div', {}, endpoint(d))) },
  { title: 'Ready', cell: (r) => count(r.messages_ready), numeric: true },
  { title: 'Unacked', cell: (r) => count(r.messages_unacknowledged), numeric: true },
  { title: 'Dead letters', cell: (r) => h('span', { class: 'dead-letters' }, count(r.dead_letters)), numeric: true },
  { title: 'Delivered', cell: deliveredRate, numeric: true },
  { title: '', cell: pauseButton },
];

export default {
  route: 'routes',
  title: 'Routes',
  nav: true,
  mount(view) {
    const list = h('div');
    view.append(h('h1', {}, 'Routes'), list);
    return {
      async refresh() {
        const routes = await api('GET', '/api/ferry/routes');
        replace(list, table(COLUMNS, routes, { empty: 'No routes.', rowAttributes: (r) => ({ 'data-name': r.name, 'data-state': r.state }) }));
      },
    };
  },
};
