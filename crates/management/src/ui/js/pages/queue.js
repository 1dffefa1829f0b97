// One queue: its properties and depths (/api/queues/VHOST/NAME), its consumers
// (/api/consumers/VHOST, those of this queue) and bindings (…/bindings), publish a message
// to it through the default exchange (POST /api/exchanges/VHOST/amq.default/publish), get
// messages (POST …/get, RabbitMQ's ack modes and encodings), purge (DELETE …/contents)
// and delete it (DELETE /api/queues/VHOST/NAME).

import { api, apiPath, confirmButton, count, details, flag, h, link, rate, refreshNow, replace, say, table } from '../core.js';

const CONSUMER_COLUMNS = [
  { title: 'Consumer tag', cell: (c) => c.consumer_tag },
  { title: 'Channel', cell: (c) => link(c.channel_details.name, 'connections') },
  { title: 'Peer', cell: (c) => `${c.channel_details.peer_host}:${c.channel_details.peer_port}` },
  { title: 'User', cell: (c) => c.channel_details.user },
  { title: 'Ack required', cell: (c) => flag(c.ack_required) },
  { title: 'Exclusive', cell: (c) => flag(c.exclusive) },
  { title: 'Prefetch', cell: (c) => count(c.prefetch_count), numeric: true },
];

const BINDING_COLUMNS = [
  { title: 'From', cell: (b) => (b.source === '' ? '(AMQP default)' : b.source) },
  { title: 'Routing key', cell: (b) => b.routing_key },
  { title: 'Arguments', cell: (b) => h('code', {}, JSON.stringify(b.arguments || {})) },
];

const ACK_MODES = [
  ['ack_requeue_true', 'Nack message requeue true'],
  ['ack_requeue_false', 'Automatic ack'],
  ['reject_requeue_true', 'Reject requeue true'],
  ['reject_requeue_false', 'Reject requeue false'],
];

function summary(queue) {
  const stats = queue.message_stats || {};
  return h(
    'div',
    { class: 'row' },
    h(
      'div',
      { class: 'card' },
      h('h2', {}, 'Messages'),
      details([
        ['Ready', h('span', { id: 'queue-ready' }, count(queue.messages_ready))],
        ['Unacked', h('span', { id: 'queue-unacked' }, count(queue.messages_unacknowledged))],
        ['Total', h('span', { id: 'queue-total' }, count(queue.messages))],
        ['Consumers', count(queue.consumers)],
        ['Incoming', rate(stats.publish_details)],
        ['Deliver / get', rate(stats.deliver_get_details || stats.deliver_details)],
        ['Ack', rate(stats.ack_details)],
      ]),
    ),
    h(
      'div',
      { class: 'card' },
      h('h2', {}, 'Details'),
      details([
        ['Type', queue.type || 'classic'],
        ['State', queue.state || '–'],
        ['Durable', flag(queue.durable)],
        ['Auto-delete', flag(queue.auto_delete)],
        ['Exclusive', flag(queue.exclusive)],
        ['Arguments', h('code', {}, JSON.stringify(queue.arguments || {}))],
      ]),
    ),
  );
}

function message(m, index) {
  return h(
    'div',
    { class: 'card message', 'data-message': index },
    h('h3', {}, `Message ${index + 1}`),
    details([
      ['Exchange', m.exchange === '' ? '(AMQP default)' : m.exchange],
      ['Routing key', m.routing_key],
      ['Redelivered', flag(m.redelivered)],
      ['Properties', h('code', {}, JSON.stringify(m.properties || {}))],
      ['Payload', h('span', { class: 'muted' }, `${count(m.payload_bytes)} bytes, encoding: ${m.payload_encoding}`)],
    ]),
    h('pre', { class: 'payload' }, m.payload),
  );
}

function getForm(vhost, name, output) {
  const ackmode = h('select', { id: 'get-ackmode' }, ACK_MODES.map(([value, label]) => h('option', { value }, label)));
  const encoding = h('select', { id: 'get-encoding' }, h('option', { value: 'auto' }, 'Auto string / base64'), h('option', { value: 'base64' }, 'base64'));
  const messages = h('input', { id: 'get-count', type: 'number', min: 1, value: 1 });
  const truncate = h('input', { id: 'get-truncate', type: 'number', min: 1, value: 50000 });
  const submit = h('button', { id: 'get-submit', type: 'submit' }, 'Get messages');
  const form = h(
    'form',
    { class: 'card form' },
    h('h2', {}, 'Get messages'),
    h('p', { class: 'muted' }, 'Getting a message removes it from the queue and, with a requeue mode, puts it back (redelivered).'),
    h('label', {}, 'Ack mode ', ackmode),
    h('label', {}, 'Encoding ', encoding),
    h('label', {}, 'Messages ', messages),
    h('label', {}, 'Truncate at (bytes) ', truncate),
    submit,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    submit.disabled = true;
    try {
      const got = await api('POST', apiPath('queues', vhost, name, 'get'), {
        body: { count: Number(messages.value), ackmode: ackmode.value, encoding: encoding.value, truncate: Number(truncate.value) },
      });
      replace(output, got.length ? got.map(message) : h('p', { class: 'muted', id: 'get-empty' }, 'Queue is empty.'));
    } catch (e) {
      replace(output, h('p', { class: 'error' }, e.message));
    } finally {
      submit.disabled = false;
      window.dispatchEvent(new Event('ferry:refresh'));
    }
  });
  return form;
}

/** Publishes to the queue through the default exchange, as RabbitMQ's UI does. */
function publishForm(vhost, name) {
  const deliveryMode = h('select', { id: 'publish-delivery-mode' }, h('option', { value: '2' }, '2 – persistent'), h('option', { value: '1' }, '1 – non-persistent'));
  const headers = h('input', { id: 'publish-headers', placeholder: '{"source": "ui"}' });
  const contentType = h('input', { id: 'publish-content-type', placeholder: 'application/json' });
  const payload = h('textarea', { id: 'publish-payload', rows: 4 });
  const submit = h('button', { id: 'publish-submit', type: 'submit' }, 'Publish message');
  const result = h('span', { id: 'publish-result', class: 'result', role: 'status' });
  const form = h(
    'form',
    { class: 'card form', id: 'publish' },
    h('h2', {}, 'Publish message'),
    h('p', { class: 'muted' }, 'Published to the default exchange with the queue’s name as routing key.'),
    h('div', { class: 'inline' }, h('label', {}, 'Delivery mode ', deliveryMode), h('label', {}, 'Content type ', contentType)),
    h('label', {}, 'Headers (JSON) ', headers),
    payload,
    h('div', { class: 'inline' }, submit, result),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const properties = { delivery_mode: Number(deliveryMode.value) };
    if (contentType.value) properties.content_type = contentType.value;
    try {
      if (headers.value.trim()) properties.headers = JSON.parse(headers.value);
    } catch (e) {
      say(result, `The headers are not JSON: ${e.message}`, true);
      return;
    }
    submit.disabled = true;
    try {
      const answer = await api('POST', apiPath('exchanges', vhost, 'amq.default', 'publish'), {
        body: { properties, routing_key: name, payload: payload.value, payload_encoding: 'string' },
      });
      say(result, answer.routed ? 'Message published.' : 'Message published but not routed.', !answer.routed);
    } catch (e) {
      say(result, e.message, true);
    } finally {
      submit.disabled = false;
      refreshNow();
    }
  });
  return form;
}

function deleteForm(vhost, name) {
  const result = h('span', { id: 'delete-result', class: 'result', role: 'status' });
  const button = confirmButton({ id: 'queue-delete' }, 'Delete queue', async () => {
    try {
      await api('DELETE', apiPath('queues', vhost, name));
      location.hash = '#/queues';
    } catch (e) {
      result.textContent = e.message;
    }
  });
  return h('div', { class: 'card form' }, h('h2', {}, 'Delete'), h('p', { class: 'muted' }, 'Deletes the queue with its messages; its consumers are cancelled.'), button, ' ', result);
}

function purgeForm(vhost, name) {
  const result = h('span', { id: 'purge-result', role: 'status' });
  const button = confirmButton({ id: 'purge' }, 'Purge messages', async () => {
    try {
      await api('DELETE', apiPath('queues', vhost, name, 'contents'));
      result.textContent = 'Purged.';
    } catch (e) {
      result.textContent = e.message;
    }
    window.dispatchEvent(new Event('ferry:refresh'));
  });
  return h('div', { class: 'card form' }, h('h2', {}, 'Purge'), h('p', { class: 'muted' }, 'Removes every ready message.'), button, ' ', result);
}

export default {
  route: 'queue',
  title: 'Queue',
  nav: false,
  navAs: 'queues',
  mount(view, [vhost = '/', name = '']) {
    const summaryBox = h('div');
    const consumers = h('div', { id: 'queue-consumers' });
    const bindings = h('div', { id: 'queue-bindings' });
    const got = h('div', { id: 'get-output' });
    view.append(
      h('p', { class: 'crumbs' }, link('Queues', 'queues'), ` › ${vhost} › `),
      h('h1', {}, 'Queue ', h('span', { id: 'queue-name' }, name)),
      summaryBox,
      h('div', { class: 'row' }, h('div', { class: 'card' }, h('h2', {}, 'Consumers'), consumers), h('div', { class: 'card' }, h('h2', {}, 'Bindings'), bindings)),
      h('div', { class: 'row' }, publishForm(vhost, name), getForm(vhost, name, got)),
      got,
      h('div', { class: 'row' }, purgeForm(vhost, name), deleteForm(vhost, name)),
    );
    return {
      async refresh() {
        const [queue, everyConsumer, queueBindings] = await Promise.all([
          api('GET', apiPath('queues', vhost, name)),
          api('GET', apiPath('consumers', vhost)),
          api('GET', apiPath('queues', vhost, name, 'bindings')),
        ]);
        replace(summaryBox, summary(queue));
        const mine = everyConsumer.filter((c) => c.queue && c.queue.name === name);
        replace(consumers, table(CONSUMER_COLUMNS, mine, { empty: 'No consumers.', rowAttributes: (c) => ({ 'data-name': c.consumer_tag }) }));
        replace(bindings, table(BINDING_COLUMNS, queueBindings, { empty: 'No bindings.', rowAttributes: (b) => ({ 'data-source': b.source, 'data-key': b.routing_key }) }));
      },
    };
  },
};
