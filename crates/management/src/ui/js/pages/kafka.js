// Kafka: the Kafka front's topics with each partition's offsets, its consumer groups
// with their lag and its share groups with their records in flight, archived and lag,
// from /api/ferry/kafka/topics, /api/ferry/kafka/groups and /api/ferry/kafka/share-groups
// (Ferry's own endpoints, for users tagged monitoring or administrator), and a form that
// creates a topic (PUT /api/ferry/kafka/topics/NAME, administrators). A name links to the
// topic's or the group's own page.

import { api, apiPath, count, h, link, monitored, paged, refreshNow, replace, say, table } from '../core.js';

/** Topics and groups shown per page. */
const PAGE_SIZE = 25;

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
  { title: 'Name', cell: (t) => link(t.name, 'topic', t.name) },
  { title: 'Partitions', cell: (t) => count(t.partitions.length), numeric: true },
  { title: 'Retention (ms)', cell: (t) => count(t.config['retention.ms']), numeric: true },
  { title: 'Offsets (partition: log start–high watermark)', cell: partitionOffsets },
];

const GROUP_COLUMNS = [
  { title: 'Group', cell: (g) => link(g.group_id, 'group', g.group_id) },
  { title: 'State', cell: (g) => h('span', { class: `state state-${g.state}` }, g.state) },
  { title: 'Protocol', cell: (g) => g.protocol || '–' },
  { title: 'Members', cell: (g) => count(g.members.length), numeric: true },
  { title: 'Committed offsets', cell: groupOffsets },
  { title: 'Total lag', cell: (g) => h('span', { class: 'total-lag' }, count(g.total_lag)), numeric: true },
];

const SHARE_GROUP_COLUMNS = [
  { title: 'Share group', cell: (g) => link(g.group_id, 'share-group', g.group_id) },
  { title: 'State', cell: (g) => h('span', { class: `state state-${g.state}` }, g.state) },
  { title: 'Members', cell: (g) => count(g.members.length), numeric: true },
  { title: 'Partitions', cell: (g) => count(g.partitions.length), numeric: true },
  { title: 'In flight', cell: (g) => h('span', { class: 'in-flight' }, count(g.total_in_flight)), numeric: true },
  { title: 'Waiting', cell: (g) => count(g.total_waiting), numeric: true },
  { title: 'Archived', cell: (g) => h('span', { class: 'archived' }, count(g.total_archived)), numeric: true },
  { title: 'Total lag', cell: (g) => h('span', { class: 'total-lag' }, count(g.total_lag)), numeric: true },
];

/** The form that creates a topic: name, partitions, and two common settings. */
function createForm() {
  const name = h('input', { id: 'topic-name', required: true, placeholder: 'orders', pattern: '[a-zA-Z0-9._\\-]+' });
  const partitions = h('input', { id: 'topic-partitions', type: 'number', min: 1, placeholder: 'default' });
  const retention = h('input', { id: 'topic-retention', type: 'number', min: -1, placeholder: 'default' });
  const cleanup = h(
    'select',
    { id: 'topic-cleanup' },
    h('option', { value: '' }, 'default'),
    h('option', { value: 'delete' }, 'delete'),
    h('option', { value: 'compact' }, 'compact'),
  );
  const submit = h('button', { id: 'topic-create', type: 'submit' }, 'Create topic');
  const result = h('span', { id: 'topic-create-result', class: 'result', role: 'status' });
  const form = h(
    'form',
    { class: 'card form', id: 'create-topic' },
    h('h2', {}, 'Create a topic'),
    h('div', { class: 'inline' },
      h('label', {}, 'Name ', name),
      h('label', {}, 'Partitions ', partitions),
      h('label', {}, 'retention.ms ', retention),
      h('label', {}, 'cleanup.policy ', cleanup)),
    h('div', { class: 'inline' }, submit, result),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const configs = {};
    if (retention.value !== '') configs['retention.ms'] = retention.value;
    if (cleanup.value) configs['cleanup.policy'] = cleanup.value;
    const body = { configs };
    if (partitions.value !== '') body.partitions = Number(partitions.value);
    submit.disabled = true;
    try {
      await api('PUT', apiPath('ferry', 'kafka', 'topics', name.value), { body });
      result.replaceChildren('Created ', link(name.value, 'topic', name.value), '.');
      result.className = 'result';
      name.value = '';
    } catch (e) {
      say(result, e.message, true);
    } finally {
      submit.disabled = false;
      refreshNow();
    }
  });
  return form;
}

export default {
  route: 'kafka',
  title: 'Kafka',
  nav: true,
  mount(view) {
    const topics = h('div', { id: 'topics' });
    const groups = h('div', { id: 'groups' });
    const shareGroups = h('div', { id: 'share-groups' });
    const pages = { topics: {}, groups: {}, shareGroups: {} };
    let topicList = [];
    let groupList = [];
    let shareGroupList = [];
    const draw = () => {
      const t = paged(topicList, pages.topics, PAGE_SIZE, draw);
      const g = paged(groupList, pages.groups, PAGE_SIZE, draw);
      const s = paged(shareGroupList, pages.shareGroups, PAGE_SIZE, draw);
      replace(topics, table(TOPIC_COLUMNS, t.shown, { empty: 'No topics.', rowAttributes: (x) => ({ 'data-name': x.name }) }), t.pager);
      replace(groups, table(GROUP_COLUMNS, g.shown, { empty: 'No consumer groups.', rowAttributes: (x) => ({ 'data-name': x.group_id }) }), g.pager);
      replace(shareGroups, table(SHARE_GROUP_COLUMNS, s.shown, { empty: 'No share groups.', rowAttributes: (x) => ({ 'data-name': x.group_id }) }), s.pager);
    };
    view.append(
      h('h1', {}, 'Kafka'),
      createForm(),
      h('h2', {}, 'Topics'),
      topics,
      h('h2', {}, 'Consumer groups'),
      groups,
      h('h2', {}, 'Share groups'),
      shareGroups,
    );
    return {
      async refresh() {
        const answers = await Promise.all(
          ['topics', 'groups', 'share-groups'].map((what) => monitored(api('GET', `/api/ferry/kafka/${what}`))),
        );
        if (answers.includes(null)) {
          // "Not monitor user" refuses this page only; it must not log the user out.
          replace(topics, h('p', { class: 'muted' }, 'Only users tagged monitoring or administrator see the Kafka front.'));
          replace(groups);
          replace(shareGroups);
          return;
        }
        [topicList, groupList, shareGroupList] = answers;
        draw();
      },
    };
  },
};
