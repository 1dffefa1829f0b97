// One queue: its properties and depths (/api/queues/VHOST/NAME), get messages (POST
// …/get, RabbitMQ's ack modes and encodings) and purge (DELETE …/contents).

import { api, apiPath, confirmButton, count, details, flag, h, link, rate, replace } from '../core.js';

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
    const got = h('div', { id: 'get-output' });
    view.append(
      h('p', { class: 'crumbs' }, link('Queues', 'queues'), ` › ${vhost} › `),
      h('h1', {}, 'Queue ', h('span', { id: 'queue-name' }, name)),
      summaryBox,
      h('div', { class: 'row' }, getForm(vhost, name, got), purgeForm(vhost, name)),
      got,
    );
    return {
      async refresh() {
        replace(summaryBox, summary(await api('GET', apiPath('queues', vhost, name))));
      },
    };
  },
};
