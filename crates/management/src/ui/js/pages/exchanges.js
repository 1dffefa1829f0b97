// Exchanges: every exchange with its type, features and message rates, from /api/exchanges.

import { api, h, rate, replace, table } from '../core.js';

function features(e) {
  const marks = [e.durable && ['D', 'durable'], e.auto_delete && ['AD', 'auto-delete'], e.internal && ['I', 'internal']].filter(Boolean);
  return marks.map(([mark, title]) => h('abbr', { title, class: 'feature' }, mark));
}

const COLUMNS = [
  { title: 'Virtual host', cell: (e) => e.vhost },
  { title: 'Name', cell: (e) => (e.name === '' ? '(AMQP default)' : e.name) },
  { title: 'Type', cell: (e) => e.type },
  { title: 'Features', cell: features },
  { title: 'Message rate in', cell: (e) => rate((e.message_stats || {}).publish_in_details), numeric: true },
  { title: 'Message rate out', cell: (e) => rate((e.message_stats || {}).publish_out_details), numeric: true },
];

export default {
  route: 'exchanges',
  title: 'Exchanges',
  nav: true,
  mount(view) {
    const list = h('div');
    view.append(h('h1', {}, 'Exchanges'), list);
    return {
      async refresh() {
        const exchanges = await api('GET', '/api/exchanges');
        replace(list, table(COLUMNS, exchanges, { empty: 'No exchanges.', rowAttributes: (e) => ({ 'data-vhost': e.vhost, 'data-name': e.name }) }));
      },
    };
  },
};
