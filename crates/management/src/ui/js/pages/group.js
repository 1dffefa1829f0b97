// One Kafka consumer group: its state, members and committed offsets with the lag per
// partition (GET /api/ferry/kafka/groups/ID), and an offset reset (POST …/reset-offsets)
// to the earliest or latest offset, an offset or a time, previewed as a dry run first: the
// reset button acts only on the settings its preview showed.

import { api, apiPath, count, details, h, link, refreshNow, replace, say, table } from '../core.js';

const OFFSET_COLUMNS = [
  { title: 'Topic', cell: (o) => link(o.topic, 'topic', o.topic) },
  { title: 'Partition', cell: (o) => count(o.partition), numeric: true },
  { title: 'Committed', cell: (o) => h('span', { class: 'committed' }, count(o.committed_offset)), numeric: true },
  { title: 'High watermark', cell: (o) => count(o.high_watermark), numeric: true },
  { title: 'Lag', cell: (o) => h('span', { class: 'lag' }, count(o.lag)), numeric: true },
];

const MEMBER_COLUMNS = [
  { title: 'Member', cell: (m) => m.member_id },
  { title: 'Client ID', cell: (m) => m.client_id },
  { title: 'Host', cell: (m) => m.client_host },
];

const RESET_COLUMNS = [
  { title: 'Topic', cell: (r) => r.topic },
  { title: 'Partition', cell: (r) => count(r.partition), numeric: true },
  { title: 'New offset', cell: (r) => h('span', { class: 'new-offset' }, count(r.offset)), numeric: true },
];

/** A time typed as milliseconds since 1970 or as a date (`2026-11-28T13:00:00Z`). */
function millis(text) {
  const t = text.trim();
  return /^\d+$/.test(t) ? Number(t) : Date.parse(t);
}

function resetForm(path, output) {
  const to = h(
    'select',
    { id: 'reset-to' },
    h('option', { value: 'earliest' }, 'Earliest (each log start)'),
    h('option', { value: 'latest' }, 'Latest (each high watermark)'),
    h('option', { value: 'offset' }, 'Offset'),
    h('option', { value: 'timestamp' }, 'Time'),
  );
  const offset = h('input', { id: 'reset-offset', type: 'number', min: 0, value: 0 });
  const timestamp = h('input', { id: 'reset-timestamp', placeholder: 'ms or 2026-11-28T13:00:00Z' });
  const topics = h('input', { id: 'reset-topics', placeholder: 'the group’s topics' });
  const preview = h('button', { id: 'reset-preview', type: 'submit' }, 'Preview (dry run)');
  const apply = h('button', { id: 'reset-apply', type: 'button', class: 'danger', disabled: true }, 'Reset offsets');
  const result = h('span', { id: 'reset-result', class: 'result', role: 'status' });
  const offsetLabel = h('label', {}, 'Offset ', offset);
  const timeLabel = h('label', {}, 'Time ', timestamp);
  /** The request body the inputs say, and the one the last preview showed. */
  let previewed = null;
  const body = () => {
    const b = { to: to.value };
    if (to.value === 'offset') b.offset = Number(offset.value);
    if (to.value === 'timestamp') b.timestamp = millis(timestamp.value);
    const named = topics.value.split(',').map((t) => t.trim()).filter(Boolean);
    if (named.length) b.topics = named;
    return b;
  };
  const changed = () => {
    offsetLabel.hidden = to.value !== 'offset';
    timeLabel.hidden = to.value !== 'timestamp';
    apply.disabled = previewed === null || JSON.stringify(body()) !== previewed;
  };
  for (const input of [to, offset, timestamp, topics]) for (const event of ['input', 'change']) input.addEventListener(event, changed);
  changed();
  const send = async (dryRun) => {
    const b = body();
    if (b.timestamp !== undefined && Number.isNaN(b.timestamp)) {
      result.textContent = 'The time is neither milliseconds nor a date.';
      return;
    }
    preview.disabled = apply.disabled = true;
    try {
      const answer = await api('POST', `${path}/reset-offsets`, { body: { ...b, dry_run: dryRun } });
      previewed = dryRun ? JSON.stringify(b) : null;
      say(result, dryRun ? 'Preview: nothing changed yet; Reset offsets writes these.' : `Reset ${answer.length} offsets.`);
      replace(output, table(RESET_COLUMNS, answer, { empty: 'No partitions to reset.', rowAttributes: (r) => ({ 'data-topic': r.topic, 'data-partition': r.partition }) }));
    } catch (e) {
      previewed = null;
      say(result, e.message, true);
      replace(output);
    } finally {
      preview.disabled = false;
      changed();
      if (!dryRun) refreshNow();
    }
  };
  apply.addEventListener('click', () => send(false));
  const form = h(
    'form',
    { class: 'card form', id: 'reset-offsets' },
    h('h2', {}, 'Reset offsets'),
    h('p', { class: 'muted' }, 'As kafka-consumer-groups --reset-offsets: only while the group has no members. Preview first; Reset offsets writes what the preview showed.'),
    h('div', { class: 'inline' }, h('label', {}, 'To ', to), offsetLabel, timeLabel, h('label', {}, 'Topics ', topics)),
    h('div', { class: 'inline' }, preview, apply, result),
    output,
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    send(true);
  });
  return form;
}

export default {
  route: 'group',
  title: 'Consumer group',
  nav: false,
  navAs: 'kafka',
  mount(view, [id = '']) {
    const path = apiPath('ferry', 'kafka', 'groups', id);
    const summary = h('div');
    const output = h('div', { id: 'reset-output', class: 'wide' });
    view.append(
      h('p', { class: 'crumbs' }, link('Kafka', 'kafka'), ' › '),
      h('h1', {}, 'Consumer group ', h('span', { id: 'group-title' }, id)),
      summary,
      resetForm(path, output),
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
                ['State', h('span', { id: 'group-state', class: `state state-${g.state}` }, g.state)],
                ['Protocol', `${g.protocol_type || '–'} / ${g.protocol || '–'}`],
                ['Generation', count(g.generation)],
                ['Members', count(g.members.length)],
                ['Total lag', h('span', { id: 'group-lag' }, count(g.total_lag))],
              ])),
            h('div', { class: 'card' }, h('h2', {}, 'Members'), table(MEMBER_COLUMNS, g.members, { empty: 'No members: the offsets can be reset.' }))),
          h('div', { class: 'card' },
            h('h2', {}, 'Committed offsets'),
            table(OFFSET_COLUMNS, g.offsets, { empty: 'No committed offsets.', rowAttributes: (o) => ({ 'data-topic': o.topic, 'data-partition': o.partition }) })),
        );
      },
    };
  },
};
