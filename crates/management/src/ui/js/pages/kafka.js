// Kafka: the Kafka front's topics with each partition's offsets and its consumer groups
// with their lag, from /api/ferry/kafka/topics and /api/ferry/kafka/groups (Ferry's own
// endpoints, for users tagged monitoring or administrator).

import { ApiError, api, count, h, replace, table } from '../core.js';

/** One line per partition: `P: start–high (stable S)`. */
function partitionOffsets(t) {
  return t.partitions.map((p) =>
    h('div', { class: 'partition', 'data-partition': p.partition },
      `${p.partition}: ${count(p.log_start_offset)}–${count(p.high_watermark)} (stable ${count(p.last_stable_offset)})`));
}

/** One line per committed offset: `topic/P: committed of high, lag L`. */
function groupOffsets(g) {
  return g.offsets.map((o) =>
    h('div', { class: 'offset', 'data-topic': o.topic, 'data-partition': o.partition },
      `${o.topic}/${o.partition}: ${count(o.committed_offset)} of ${count(o.high_watermark)}, lag ${count(o.lag)}`));
}

const TOPIC_COLUMNS = [
  { title: 'Name', cell: (t) => t.name },
  { title: 'Partitions', cell: (t) => count(t.partitions.length), numeric: true },
  { title: 'Retention (ms)', cell: (t) => count(t.config['retention.ms']), numeric: true },
  { title: 'Offsets (partition: log start–high watermark)', cell: partitionOffsets },
];

const GROUP_COLUMNS = [
  { title: 'Group', cell: (g) => g.group_id },
  { title: 'State', cell: (g) => h('span', { class: `state state-${g.state}` }, g.state) },
  { title: 'Protocol', cell: (g) => g.protocol || '–' },
  { title: 'Members', cell: (g) => count(g.members.length), numeric: true },
  { title: 'Committed offsets', cell: groupOffsets },
  { title: 'Total lag', cell: (g) => h('span', { class: 'total-lag' }, count(g.total_lag)), numeric: true },
];

export default {
  route: 'kafka',
  title: 'Kafka',
  nav: true,
  mount(view) {
    const topics = h('div');
    const groups = h('div');
    view.append(h('h1', {}, 'Kafka'), h('h2', {}, 'Topics'), topics, h('h2', {}, 'Consumer groups'), groups);
    return {
      async refresh() {
        let answers;
        try {
          answers = await Promise.all([api('GET', '/api/ferry/kafka/topics'), api('GET', '/api/ferry/kafka/groups')]);
        } catch (e) {
          // "Not monitor user" refuses this page only; it must not log the user out.
          if (e instanceof ApiError && e.status === 401 && e.message === 'Not monitor user') {
            replace(topics, h('p', { class: 'muted' }, 'Only users tagged monitoring or administrator see the Kafka front.'));
            replace(groups);
            return;
          }
          throw e;
        }
        const [topicList, groupList] = answers;
        replace(topics, table(TOPIC_COLUMNS, topicList, { empty: 'No topics.', rowAttributes: (t) => ({ 'data-name': t.name }) }));
        replace(groups, table(GROUP_COLUMNS, groupList, { empty: 'No consumer groups.', rowAttributes: (g) => ({ 'data-name': g.group_id }) }));
      },
    };
  },
};
