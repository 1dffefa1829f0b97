// Overview: the node, object and message totals, and message-rate and queued-message
// charts drawn from /api/overview's message_stats and queue_totals, sampled at each refresh.

import { api, count, h, lineChart, rateOf, replace, details } from '../core.js';

/** How far back the samples reach; the charts show the last minute or all of it. */
const WINDOW_MS = 10 * 60 * 1000;
const WINDOWS = [
  [60 * 1000, 'Last minute'],
  [WINDOW_MS, 'Last ten minutes'],
];

/**
 * Samples of /api/overview, kept while the tab is open so the charts survive a visit to
 * another page: `{at, publish, deliver, ack, ready, unacked}`.
 */
const samples = [];

function record(overview) {
  const stats = overview.message_stats || {};
  const totals = overview.queue_totals || {};
  const now = Date.now();
  samples.push({
    at: now,
    publish: rateOf(stats, 'publish'),
    // RabbitMQ sums deliveries and gets in deliver_get; an API without it has deliver.
    deliver: rateOf(stats, 'deliver_get') || rateOf(stats, 'deliver'),
    ack: rateOf(stats, 'ack'),
    ready: totals.messages_ready || 0,
    unacked: totals.messages_unacknowledged || 0,
  });
  while (samples.length && now - samples[0].at > WINDOW_MS) samples.shift();
}

const series = (name, key, color) => ({ name, color, points: samples.map((s) => [s.at, s[key]]) });

function totals(title, pairs) {
  return h(
    'div',
    { class: 'card totals' },
    h('h2', {}, title),
    h('div', { class: 'numbers' }, pairs.map(([label, value, id]) => h('div', { class: 'number', 'data-total': id }, h('strong', {}, count(value)), h('span', {}, label)))),
  );
}

export default {
  route: 'overview',
  title: 'Overview',
  nav: true,
  mount(view) {
    const span = h('select', { id: 'chart-window' }, WINDOWS.map(([ms, label]) => h('option', { value: ms }, label)));
    let overview = null;
    const body = h('div');
    span.addEventListener('change', () => overview && draw());
    view.append(h('h1', {}, 'Overview'), h('div', { class: 'toolbar' }, h('label', { class: 'muted' }, 'Charts ', span)), body);

    function draw() {
      const windowMs = Number(span.value);
      const objects = overview.object_totals || {};
      const queued = overview.queue_totals || {};
      replace(
        body,
        h(
          'div',
          { class: 'row' },
          totals('Queued messages', [
            ['Ready', queued.messages_ready, 'messages_ready'],
            ['Unacked', queued.messages_unacknowledged, 'messages_unacknowledged'],
            ['Total', queued.messages, 'messages'],
          ]),
          totals('Objects', [
            ['Connections', objects.connections, 'connections'],
            ['Channels', objects.channels, 'channels'],
            ['Exchanges', objects.exchanges, 'exchanges'],
            ['Queues', objects.queues, 'queues'],
            ['Consumers', objects.consumers, 'consumers'],
          ]),
        ),
        h(
          'div',
          { class: 'row' },
          h(
            'div',
            { class: 'card', id: 'chart-rates' },
            h('h2', {}, 'Message rates'),
            lineChart([series('Publish', 'publish', '#2f7fd8'), series('Deliver', 'deliver', '#2fa86b'), series('Ack', 'ack', '#d8892f')], {
              windowMs,
              unit: '/s',
            }),
          ),
          h(
            'div',
            { class: 'card', id: 'chart-queued' },
            h('h2', {}, 'Queued messages'),
            lineChart([series('Ready', 'ready', '#2f7fd8'), series('Unacked', 'unacked', '#c0463a')], {
              windowMs,
              format: (v) => count(Math.round(v)),
            }),
          ),
        ),
        h(
          'div',
          { class: 'card' },
          h('h2', {}, 'Node'),
          details([
            ['Product', `${overview.product_name || 'Ferry'} ${overview.product_version || ''}`],
            ['Node', overview.node || '–'],
            ['Cluster', overview.cluster_name || '–'],
            ['Management API', overview.management_version || '–'],
          ]),
        ),
      );
    }

    return {
      async refresh() {
        overview = await api('GET', '/api/overview');
        record(overview);
        draw();
      },
    };
  },
};
