// Queues: every queue with its type, state, depths, consumers and message rates, from
// /api/queues, 50 to a page; a name links to the queue's own page.

import { api, count, h, link, paged, rate, replace, table } from '../core.js';

/** Queues per page. */
const PAGE_SIZE = 50;

const stat = (queue, name) => rate((queue.message_stats || {})[`${name}_details`]);

const COLUMNS = [
  { title: 'Virtual host', cell: (q) => q.vhost },
  { title: 'Name', cell: (q) => link(q.name, 'queue', q.vhost, q.name) },
  { title: 'Type', cell: (q) => q.type || 'classic' },
  { title: 'State', cell: (q) => h('span', { class: `state state-${q.state}` }, q.state || '–') },
  { title: 'Ready', cell: (q) => count(q.messages_ready), numeric: true },
  { title: 'Unacked', cell: (q) => count(q.messages_unacknowledged), numeric: true },
  { title: 'Total', cell: (q) => count(q.messages), numeric: true },
  { title: 'Consumers', cell: (q) => count(q.consumers), numeric: true },
  { title: 'Incoming', cell: (q) => stat(q, 'publish'), numeric: true },
  { title: 'Deliver / get', cell: (q) => ((q.message_stats || {}).deliver_get_details ? stat(q, 'deliver_get') : stat(q, 'deliver')), numeric: true },
  { title: 'Ack', cell: (q) => stat(q, 'ack'), numeric: true },
];

export default {
  route: 'queues',
  title: 'Queues',
  nav: true,
  mount(view) {
    const filter = h('input', { id: 'queue-filter', type: 'search', placeholder: 'Filter by name' });
    const list = h('div');
    let queues = [];
    const page = {};
    const draw = () => {
      const needle = filter.value.trim().toLowerCase();
      const { shown, pager } = paged(queues.filter((q) => q.name.toLowerCase().includes(needle)), page, PAGE_SIZE, draw);
      replace(
        list,
        table(COLUMNS, shown, {
          empty: needle ? 'No queue matches the filter.' : 'No queues.',
          rowAttributes: (q) => ({ 'data-vhost': q.vhost, 'data-name': q.name }),
        }),
        pager,
      );
    };
    filter.addEventListener('input', () => {
      page.page = 0;
      draw();
    });
    view.append(h('h1', {}, 'Queues'), h('div', { class: 'toolbar' }, filter), list);
    return {
      async refresh() {
        queues = await api('GET', '/api/queues');
        draw();
      },
    };
  },
};
