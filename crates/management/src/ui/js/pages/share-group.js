// One Kafka share group (KIP-932): its state, members with their assigned partitions, and
// per share-partition its start and end offsets, the records in flight (acquired and not
// acknowledged), waiting (fed and not acquired) and archived (rejected or past the
// delivery count limit), and its lag (GET /api/ferry/kafka/share-groups/ID).

import { api, apiPath, count, details, h, link, replace, table } from '../core.js';

const PARTITION_COLUMNS = [
  { title: 'Topic', cell: (p) => link(p.topic, 'topic', p.topic) },
  { title: 'Partition', cell: (p) => count(p.partition), numeric: true },
  { title: 'Start offset', cell: (p) => h('span', { class: 'start' }, count(p.start_offset)), numeric: true },
  { title: 'End offset', cell: (p) => h('span', { class: 'end' }, count(p.end_offset)), numeric: true },
  { title: 'In flight', cell: (p) => h('span', { class: 'in-flight' }, count(p.in_flight)), numeric: true },
  { title: 'Waiting', cell: (p) => h('span', { class: 'waiting' }, count(p.waiting)), numeric: true },
  { title: 'Archived', cell: (p) => h('span', { class: 'archived' }, count(p.archived)), numeric: true },
  { title: 'Lag', cell: (p) => h('span', { class: 'lag' }, count(p.lag)), numeric: true },
];

/** A member's assignment: `topic: 0, 1` per topic. */
function assignment(m) {
  return m.assignment.map((a) => h('div', { class: 'assigned', 'data-topic': a.topic }, `${a.topic}: ${a.partitions.join(', ')}`));
}

const MEMBER_COLUMNS = [
  { title: 'Member', cell: (m) => m.member_id },
  { title: 'Client ID', cell: (m) => m.client_id },
  { title: 'Host', cell: (m) => m.client_host },
  { title: 'Assigned partitions', cell: assignment },
];

export default {
  route: 'share-group',
  title: 'Share group',
  nav: false,
  navAs: 'kafka',
  mount(view, [id = '']) {
    const path = apiPath('ferry', 'kafka', 'share-groups', id);
    const summary = h('div');
    view.append(
      h('p', { class: 'crumbs' }, link('Kafka', 'kafka'), ' › '),
      h('h1', {}, 'Share group ', h('span', { id: 'share-group-title' }, id)),
      summary,
    );
    return {
      async refresh() {
        const g = await api('GET', path);
        replace(
          summary,
          h('div', { class: 'row' },
            h('div', { class: 'card' },
              h('h2', {}, 'Group'),
              details([
                ['State', h('span', { id: 'share-group-state', class: `state state-${g.state}` }, g.state)],
                ['Group epoch', count(g.group_epoch)],
                ['Members', count(g.members.length)],
                ['In flight', h('span', { id: 'share-group-in-flight' }, count(g.total_in_flight))],
                ['Waiting', count(g.total_waiting)],
                ['Archived', h('span', { id: 'share-group-archived' }, count(g.total_archived))],
                ['Total lag', h('span', { id: 'share-group-lag' }, count(g.total_lag))],
              ])),
            h('div', { class: 'card' },
              h('h2', {}, 'Members'),
              table(MEMBER_COLUMNS, g.members, { empty: 'No members on this instance.', rowAttributes: (m) => ({ 'data-member': m.member_id }) }))),
          h('div', { class: 'card' },
            h('h2', {}, 'Share-partitions'),
            h('p', { class: 'muted' }, 'In flight: acquired by a member and not acknowledged. Waiting: fed to the group and not acquired. Archived: rejected, or past the delivery count limit. Lag: the records not settled yet (waiting, in flight, and produced past the end offset).'),
            table(PARTITION_COLUMNS, g.partitions, { empty: 'No share-partitions started yet.', rowAttributes: (p) => ({ 'data-topic': p.topic, 'data-partition': p.partition }) })),
        );
      },
    };
  },
};
