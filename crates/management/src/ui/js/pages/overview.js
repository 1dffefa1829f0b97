// Overview: the node, object and message totals, and message-rate and queued-message
// charts drawn from /api/overview's message_stats and queue_totals, sampled at each refresh;
// the node's resources and alarms from /api/nodes; the Kafka front's topics, groups and
// lag from /api/ferry/kafka/…, with record rates from the change of their offsets between
// refreshes. The node and Kafka figures are for users tagged monitoring or administrator;
// others see the rest.

import { api, bytes, count, h, lineChart, monitored, rateOf, replace, details } from '../core.js';

/** How far back the samples reach; the charts show the last minute or all of it. */
const WINDOW_MS = 10 * 60 * 1000;
const WINDOWS = [
  [60 * 1000, 'Last minute'],
  [WINDOW_MS, 'Last ten minutes'],
];

/**
 * Samples of /api/overview, kept while the tab is open so the charts survive a visit to
 * another page: `{at, publish, deliver, ack, ready, unacked, produced, committed}` (the
 * last two: records per second written to every partition and committed by every group,
 * null when unknown).
 */
const samples = [];

/** The Kafka front's totals: topics, partitions, groups, lag and the offsets' sums. */
function kafkaTotals(topics, groups) {
  return {
    topics: topics.length,
    partitions: topics.reduce((n, t) => n + t.partitions.length, 0),
    groups: groups.length,
    lag: groups.reduce((n, g) => n + (g.total_lag || 0), 0),
    written: topics.reduce((n, t) => n + t.partitions.reduce((m, p) => m + p.high_watermark, 0), 0),
    committed: groups.reduce((n, g) => n + g.offsets.reduce((m, o) => m + Math.max(0, o.committed_offset), 0), 0),
  };
}

/** Change per second of `key` between the last sample and `now`'s value (null for none). */
function perSecond(key, value, now) {
  const last = samples.findLast((s) => s.kafka);
  if (!last || value === undefined) return null;
  const seconds = (now - last.at) / 1000;
  return seconds > 0 ? Math.max(0, (value - last.kafka[key]) / seconds) : null;
}

function record(overview, kafka) {
  const stats = overview.message_stats || {};
  const totals = overview.queue_totals || {};
  const now = Date.now();
  samples.push({
    kafka,
    produced: kafka ? perSecond('written', kafka.written, now) : null,
    consumed: kafka ? perSecond('committed', kafka.committed, now) : null,
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

const series = (name, key, color) => ({ name, color, points: samples.filter((s) => s[key] !== null && s[key] !== undefined).map((s) => [s.at, s[key]]) });

/** A figure of the node: its text, and its raw value as `data-value` for tests. */
function figure(id, value, text, meter) {
  return h('span', { 'data-node': id, 'data-value': value }, text, meter ? h('meter', { min: 0, max: meter.max, value: meter.value, high: meter.high, optimum: 0 }) : null);
}

function alarm(id, raised, what) {
  return h('span', { id: `alarm-${id}`, class: raised ? 'alarm-raised' : 'alarm-none' }, raised ? `raised: ${what}` : 'none');
}

function nodeCard(node) {
  const fd = node.fd_total ? { max: node.fd_total, value: node.fd_used } : null;
  return h(
    'div',
    { class: 'card', id: 'node-resources' },
    h('h2', {}, `Node ${node.name}`),
    details([
      ['Memory', figure('mem_used', node.mem_used, `${bytes(node.mem_used)} of ${bytes(node.mem_limit)}`, { max: node.mem_limit, value: node.mem_used, high: node.mem_limit * 0.9 })],
      ['Memory alarm', alarm('memory', node.mem_alarm, 'publishers are held back')],
      [
        'Disk free',
        figure('disk_free', node.disk_free, node.disk_free === null ? 'not measured (FoundationDB)' : `${bytes(node.disk_free)} (alarm below ${bytes(node.disk_free_limit)})`),
      ],
      ['Disk alarm', alarm('disk', node.disk_free_alarm, 'publishers are held back')],
      ['File descriptors', figure('fd_used', node.fd_used, `${count(node.fd_used)} of ${count(node.fd_total)}`, fd)],
      ['Sockets', figure('sockets_used', node.sockets_used, `${count(node.sockets_used)} of ${count(node.sockets_total)}`)],
      ['Tasks', figure('proc_used', node.proc_used, `${count(node.proc_used)} (${count(node.run_queue)} waiting)`)],
      ['Uptime', figure('uptime', node.uptime, uptime(node.uptime))],
    ]),
  );
}

/** Milliseconds as `2 d 3 h`, `3 h 4 min` or `4 min 5 s`. */
function uptime(ms) {
  if (typeof ms !== 'number') return '–';
  const s = Math.floor(ms / 1000);
  const [d, hours, min] = [Math.floor(s / 86400), Math.floor(s / 3600) % 24, Math.floor(s / 60) % 60];
  if (d) return `${d} d ${hours} h`;
  if (hours) return `${hours} h ${min} min`;
  return `${min} min ${s % 60} s`;
}

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
    let node = null;
    let kafka = null;
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
        kafka
          ? h(
              'div',
              { class: 'row' },
              totals('Kafka', [
                ['Topics', kafka.topics, 'kafka_topics'],
                ['Partitions', kafka.partitions, 'kafka_partitions'],
                ['Consumer groups', kafka.groups, 'kafka_groups'],
                ['Total lag', kafka.lag, 'kafka_lag'],
              ]),
              h(
                'div',
                { class: 'card', id: 'chart-kafka' },
                h('h2', {}, 'Kafka records'),
                lineChart([series('Produced', 'produced', '#2f7fd8'), series('Committed', 'consumed', '#2fa86b')], { windowMs, unit: '/s' }),
              ),
            )
          : null,
        h(
          'div',
          { class: 'row' },
          node ? nodeCard(node) : null,
          h(
            'div',
            { class: 'card' },
            h('h2', {}, 'Product'),
            details([
              ['Product', `${overview.product_name || 'Ferry'} ${overview.product_version || ''}`],
              ['Node', overview.node || '–'],
              ['Cluster', overview.cluster_name || '–'],
              ['Management API', overview.management_version || '–'],
            ]),
          ),
        ),
      );
    }

    return {
      async refresh() {
        const [answer, nodes, topics, groups] = await Promise.all([
          api('GET', '/api/overview'),
          monitored(api('GET', '/api/nodes')),
          monitored(api('GET', '/api/ferry/kafka/topics')),
          monitored(api('GET', '/api/ferry/kafka/groups')),
        ]);
        overview = answer;
        node = nodes && nodes[0];
        kafka = topics && groups ? kafkaTotals(topics, groups) : null;
        record(overview, kafka);
        draw();
      },
    };
  },
};
