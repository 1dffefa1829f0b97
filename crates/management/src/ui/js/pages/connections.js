// Connections: every client connection from /api/connections, each with a button that
// closes it (DELETE /api/connections/NAME; the client gets connection.close 320
// CONNECTION_FORCED with the reason sent in X-Reason); and the Kafka front's live client
// connections from /api/ferry/kafka/clients (users tagged monitoring or administrator).

import { api, apiPath, count, flag, h, monitored, rate, replace, table } from '../core.js';

const KAFKA_COLUMNS = [
  { title: 'Client', cell: (c) => [c.name, c.client_id && h('div', { class: 'muted client-id' }, c.client_id)] },
  { title: 'User', cell: (c) => c.user || '–' },
  { title: 'Listener', cell: (c) => c.listener },
  { title: 'TLS', cell: (c) => flag(c.ssl) },
  { title: 'Connected since', cell: (c) => new Date(c.connected_at).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC') },
];

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
    // Names whose Close was clicked once: kept here, not in the button, because each
    // refresh draws the table anew.
    const armed = new Set();
    // What happened to a close asked for, by name, until the connection is gone.
    const outcomes = new Map();
    let redraw = () => {};

    function closeButton(connection) {
      const name = connection.name;
      const label = outcomes.get(name) || (armed.has(name) ? 'Click again to close' : 'Close');
      const button = h('button', { type: 'button', class: 'danger close', disabled: outcomes.has(name) }, label);
      button.addEventListener('click', async () => {
        // Two clicks: the first asks, the second closes (no modal dialog to script around).
        if (!armed.has(name)) {
          armed.add(name);
          setTimeout(() => armed.delete(name) && redraw(), CONFIRM_MS);
          return redraw();
        }
        armed.delete(name);
        outcomes.set(name, 'Closing…');
        redraw();
        try {
          await api('DELETE', apiPath('connections', name), { headers: { 'X-Reason': REASON } });
          outcomes.set(name, 'Closed');
        } catch (e) {
          outcomes.set(name, e.message);
        }
        redraw();
        window.dispatchEvent(new Event('ferry:refresh'));
      });
      return button;
    }

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
      { title: '', cell: closeButton },
    ];

    const kafka = h('div', { id: 'kafka-clients' });
    view.append(h('h1', {}, 'Connections'), h('h2', {}, 'AMQP'), list, h('h2', {}, 'Kafka clients'), kafka);
    return {
      async refresh() {
        const [connections, kafkaClients] = await Promise.all([api('GET', '/api/connections'), monitored(api('GET', '/api/ferry/kafka/clients'))]);
        replace(
          kafka,
          kafkaClients === null
            ? h('p', { class: 'muted' }, 'Only users tagged monitoring or administrator see the Kafka front’s clients.')
            : table(KAFKA_COLUMNS, kafkaClients, { empty: 'No Kafka clients.', rowAttributes: (c) => ({ 'data-kafka-client': c.client_id }) }),
        );
        const live = new Set(connections.map((c) => c.name));
        for (const name of outcomes.keys()) if (!live.has(name)) outcomes.delete(name);
        redraw = () => replace(list, table(columns, connections, { empty: 'No connections.', rowAttributes: (c) => ({ 'data-name': c.name }) }));
        redraw();
      },
    };
  },
};
