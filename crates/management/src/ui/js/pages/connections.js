// Connections: every client connection from /api/connections, each with a button that
// closes it (DELETE /api/connections/NAME; the client gets connection.close 320
// CONNECTION_FORCED with the reason sent in X-Reason); and the Kafka front's live client
// connections from /api/ferry/kafka/clients (users tagged monitoring or administrator),
// each with a button that closes it (DELETE /api/ferry/kafka/clients/ID; the client sees
// its connection end and connects again).

import { api, apiPath, count, flag, h, monitored, rate, replace, table } from '../core.js';

const REASON = 'Closed via the Ferry management UI';

/** The name the client gave itself (RabbitMQ's user_provided_name), if any. */
const clientName = (c) => c.user_provided_name || (c.client_properties || {}).connection_name;

/** How long a first click on Close waits for the second. */
const CONFIRM_MS = 5000;

export default {
  route: 'connections',
  title: 'Connections',
  nav: true,
  mount(view) {
    const list = h('div');
    // Connections (`amqp:NAME`, `kafka:ID`) whose Close was clicked once: kept here, not
    // in the button, because each refresh draws the tables anew.
    const armed = new Set();
    // What happened to a close asked for, by connection, until the connection is gone.
    const outcomes = new Map();
    let redraw = () => {};

    // A button that closes a connection on a second click: `key` names it among both
    // kinds, `close` asks the API.
    function closeButton(key, close) {
      const label = outcomes.get(key) || (armed.has(key) ? 'Click again to close' : 'Close');
      const button = h('button', { type: 'button', class: 'danger close', disabled: outcomes.has(key) }, label);
      button.addEventListener('click', async () => {
        // Two clicks: the first asks, the second closes (no modal dialog to script around).
        if (!armed.has(key)) {
          armed.add(key);
          setTimeout(() => armed.delete(key) && redraw(), CONFIRM_MS);
          return redraw();
        }
        armed.delete(key);
        outcomes.set(key, 'Closing…');
        redraw();
        try {
          await close();
          outcomes.set(key, 'Closed');
        } catch (e) {
          outcomes.set(key, e.message);
        }
        redraw();
        window.dispatchEvent(new Event('ferry:refresh'));
      });
      return button;
    }

    const closeAmqp = (c) =>
      closeButton(`amqp:${c.name}`, () => api('DELETE', apiPath('connections', c.name), { headers: { 'X-Reason': REASON } }));
    const closeKafka = (c) => closeButton(`kafka:${c.id}`, () => api('DELETE', apiPath('ferry', 'kafka', 'clients', String(c.id))));

    const kafkaColumns = [
      { title: 'Client', cell: (c) => [c.name, c.client_id && h('div', { class: 'muted client-id' }, c.client_id)] },
      { title: 'User', cell: (c) => c.user || '–' },
      { title: 'Listener', cell: (c) => c.listener },
      { title: 'TLS', cell: (c) => flag(c.ssl) },
      { title: 'Connected since', cell: (c) => new Date(c.connected_at).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC') },
      { title: '', cell: closeKafka },
    ];

    const columns = [
      { title: 'Name', cell: (c) => [c.name, clientName(c) && h('div', { class: 'muted' }, clientName(c))] },
      { title: 'User', cell: (c) => c.user },
      { title: 'Virtual host', cell: (c) => c.vhost },
      { title: 'Protocol', cell: (c) => c.protocol },
      { title: 'TLS', cell: (c) => flag(c.ssl) },
      { title: 'Channels', cell: (c) => count(c.channels), numeric: true },
      { title: 'State', cell: (c) => h('span', { class: `state state-${c.state}` }, c.state || '–') },
      { title: 'From client', cell: (c) => rate(c.recv_oct_details, ' B/s'), numeric: true },
      { title: 'To client', cell: (c) => rate(c.send_oct_details, ' B/s'), numeric: true },
      { title: '', cell: closeAmqp },
    ];

    const kafka = h('div', { id: 'kafka-clients' });
    view.append(h('h1', {}, 'Connections'), h('h2', {}, 'AMQP'), list, h('h2', {}, 'Kafka clients'), kafka);
    return {
      async refresh() {
        const [connections, kafkaClients] = await Promise.all([api('GET', '/api/connections'), monitored(api('GET', '/api/ferry/kafka/clients'))]);
        const live = new Set([...connections.map((c) => `amqp:${c.name}`), ...(kafkaClients || []).map((c) => `kafka:${c.id}`)]);
        for (const key of outcomes.keys()) if (!live.has(key)) outcomes.delete(key);
        redraw = () => {
          replace(list, table(columns, connections, { empty: 'No connections.', rowAttributes: (c) => ({ 'data-name': c.name }) }));
          replace(
            kafka,
            kafkaClients === null
              ? h('p', { class: 'muted' }, 'Only users tagged monitoring or administrator see the Kafka front’s clients.')
              : table(kafkaColumns, kafkaClients, {
                  empty: 'No Kafka clients.',
                  rowAttributes: (c) => ({ 'data-kafka-client': c.client_id, 'data-kafka-id': String(c.id) }),
                }),
          );
        };
        redraw();
      },
    };
  },
};
