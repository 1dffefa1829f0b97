// One route: its state and definition, pause and resume, and per destination the stage's
// depth and rates with its dead letters (GET …/dead-letters), which can be replayed (POST
// …/dead-letters/replay: back to the destination's stage, delivered again) or purged.
// A destination's dead letters are shown a few at a time, so a route with many stays a
// page that can be read.

import { api, apiPath, confirmButton, count, details, h, link, paged, rate, replace } from '../core.js';
import { endpoint, pauseButton, routeState } from './routes.js';

/** Dead letters read per destination. */
const SHOWN = 100;
/** Dead letters per page of a destination's list. */
const PAGE_SIZE = 5;

function summary(r) {
  return h(
    'div',
    { class: 'row' },
    h(
      'div',
      { class: 'card' },
      h('h2', {}, 'Route'),
      details([
        ['State', h('span', { id: 'route-state' }, routeState(r))],
        ['Reason', r.reason || '–'],
        ['Origin', r.origin],
        ['From', endpoint(r.source)],
        ['Ready', count(r.messages_ready)],
        ['Unacked', count(r.messages_unacknowledged)],
        ['Dead letters', count(r.dead_letters)],
      ]),
      h('p', {}, pauseButton(r)),
    ),
    h('div', { class: 'card' }, h('h2', {}, 'Definition'), h('pre', { class: 'payload' }, JSON.stringify(r.definition, null, 2))),
  );
}

function deadLetter(m, index) {
  return h(
    'div',
    { class: 'card message', 'data-message': index },
    details([
      ['Reason', m.dead_letter_reason || '–'],
      ['Last refusal', m.last_refusal || '–'],
      ['Dead-lettered at', m.dead_lettered_at ? new Date(m.dead_lettered_at).toISOString() : '–'],
      ['Exchange', m.exchange === '' ? '(AMQP default)' : m.exchange],
      ['Routing key', m.routing_key],
      ['Properties', h('code', {}, JSON.stringify(m.properties || {}))],
      ['Payload', h('span', { class: 'muted' }, `${count(m.payload_bytes)} bytes, encoding: ${m.payload_encoding}`)],
    ]),
    h('pre', { class: 'payload' }, m.payload),
  );
}

/**
 * One destination's card; `results` keeps the outcome of the last replay or purge per
 * destination, so the redraw that follows an action still shows it.
 */
function destination(r, d, letters, results, pages, redraw) {
  const stats = d.message_stats || {};
  const path = apiPath('ferry', 'routes', r.name, 'destinations', String(d.index), 'dead-letters');
  const result = h('span', { class: 'result', role: 'status' }, results.get(d.index) || '');
  const done = (text) => {
    results.set(d.index, text);
    result.textContent = text;
    window.dispatchEvent(new Event('ferry:refresh'));
  };
  const act = async (method, url, say) => {
    try {
      done(say(await api(method, url)));
    } catch (e) {
      done(e.message);
    }
  };
  const replay = h(
    'button',
    { type: 'button', 'data-action': 'replay', disabled: d.dead_letters === 0, onclick: () => act('POST', `${path}/replay`, (a) => `Replayed ${a.replayed}.`) },
    'Replay dead letters',
  );
  const purge = confirmButton({ 'data-action': 'purge-dead-letters', disabled: d.dead_letters === 0 }, 'Purge dead letters', () =>
    act('DELETE', path, (a) => `Purged ${a.purged}.`),
  );
  return h(
    'div',
    { class: 'card destination', 'data-index': d.index },
    h('h2', {}, `Destination ${d.index}: `, endpoint(d)),
    details([
      ['Ready', h('span', { class: 'ready' }, count(d.messages_ready))],
      ['Unacked', count(d.messages_unacknowledged)],
      ['Delivered', h('span', { class: 'delivered' }, count(stats.delivered))],
      ['Delivery rate', rate(stats.delivered_details)],
      ['Dead letters', h('span', { class: 'dead-letters' }, count(d.dead_letters))],
    ]),
    h('p', { class: 'toolbar' }, replay, ' ', purge, ' ', result),
    letters.length ? shownLetters(letters, pages, d.index, redraw) : h('p', { class: 'muted' }, 'No dead letters.'),
    d.dead_letters > letters.length ? h('p', { class: 'muted' }, `The first ${letters.length} of ${count(d.dead_letters)} are listed.`) : null,
  );
}

/** One page of a destination's dead letters, with the controls to turn it. */
function shownLetters(letters, pages, index, redraw) {
  if (!pages.has(index)) pages.set(index, {});
  const { shown, pager } = paged(letters, pages.get(index), PAGE_SIZE, redraw);
  const first = pages.get(index).page * PAGE_SIZE;
  return [pager, shown.map((m, i) => deadLetter(m, first + i))];
}

export default {
  route: 'route',
  title: 'Route',
  nav: false,
  navAs: 'routes',
  mount(view, [name = '']) {
    const box = h('div');
    const results = new Map();
    /** Per destination, the page of dead letters shown. */
    const pages = new Map();
    let last = null;
    const draw = () => {
      const [r, letters] = last;
      replace(box, summary(r), r.destinations.map((d, i) => destination(r, d, letters[i], results, pages, draw)));
    };
    view.append(h('p', { class: 'crumbs' }, link('Routes', 'routes'), ' › '), h('h1', {}, 'Route ', h('span', { id: 'route-name' }, name)), box);
    return {
      async refresh() {
        const r = await api('GET', apiPath('ferry', 'routes', name));
        const letters = await Promise.all(
          r.destinations.map((d) =>
            d.dead_letters > 0 ? api('GET', `${apiPath('ferry', 'routes', name, 'destinations', String(d.index), 'dead-letters')}?count=${SHOWN}`) : [],
          ),
        );
        last = [r, letters];
        draw();
      },
    };
  },
};
