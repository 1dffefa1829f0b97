// One Kafka topic: its partitions with their offsets (GET /api/ferry/kafka/topics/NAME),
// its settings, changed as IncrementalAlterConfigs changes them (PUT …/config: a cleared
// field goes back to its default), and its deletion (DELETE …, click twice).

import { api, apiPath, confirmButton, count, details, h, link, refreshNow, replace, table } from '../core.js';

const PARTITION_COLUMNS = [
  { title: 'Partition', cell: (p) => count(p.partition), numeric: true },
  { title: 'Log start', cell: (p) => h('span', { class: 'log-start' }, count(p.log_start_offset)), numeric: true },
  { title: 'High watermark', cell: (p) => h('span', { class: 'high-watermark' }, count(p.high_watermark)), numeric: true },
  { title: 'Last stable', cell: (p) => count(p.last_stable_offset), numeric: true },
  { title: 'Records', cell: (p) => count(p.high_watermark - p.log_start_offset), numeric: true },
];

/**
 * The settings form: one field per setting Ferry supports, holding its effective value.
 * Saving sends the fields changed since they were drawn; an emptied field is sent as null
 * (the setting's default again). `result` outlives the form, which is drawn again after a
 * save.
 */
function settingsForm(path, topic, result, done) {
  const shown = { ...topic.configs };
  const fields = Object.keys(shown)
    .sort()
    .map((name) => h('input', { name, value: shown[name], 'data-setting': name }));
  const save = h('button', { id: 'settings-save', type: 'submit' }, 'Save settings');
  const form = h(
    'form',
    { class: 'card form', id: 'topic-settings' },
    h('h2', {}, 'Settings'),
    h('p', { class: 'muted' }, 'Effective values (the topic’s own or the default). Empty a field to take the default again.'),
    details(fields.map((f) => [f.name, f])),
    h('div', { class: 'inline' }, save, result),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const changes = {};
    for (const f of fields) if (f.value !== shown[f.name]) changes[f.name] = f.value === '' ? null : f.value;
    if (Object.keys(changes).length === 0) {
      result.textContent = 'Nothing changed.';
      return;
    }
    save.disabled = true;
    try {
      await api('PUT', `${path}/config`, { body: changes });
      result.textContent = `Saved ${Object.keys(changes).join(', ')}.`;
      result.className = 'result';
      done();
    } catch (e) {
      result.textContent = e.message;
      result.className = 'result error';
    } finally {
      save.disabled = false;
    }
  });
  return form;
}

export default {
  route: 'topic',
  title: 'Topic',
  nav: false,
  navAs: 'kafka',
  mount(view, [name = '']) {
    const path = apiPath('ferry', 'kafka', 'topics', name);
    const summary = h('div');
    const settings = h('div');
    const deleted = h('span', { id: 'topic-delete-result', class: 'result', role: 'status' });
    const remove = confirmButton({ id: 'topic-delete' }, 'Delete topic', async () => {
      try {
        await api('DELETE', path);
        location.hash = '#/kafka';
      } catch (e) {
        deleted.textContent = e.message;
      }
    });
    // The settings are drawn again only after a save, never under the user's typing.
    let settingsDrawn = false;
    const settingsResult = h('span', { id: 'settings-result', class: 'result', role: 'status' });
    view.append(
      h('p', { class: 'crumbs' }, link('Kafka', 'kafka'), ' › '),
      h('h1', {}, 'Topic ', h('span', { id: 'topic-title' }, name)),
      summary,
      settings,
      h('div', { class: 'card form' }, h('h2', {}, 'Delete'), h('p', { class: 'muted' }, 'Deletes the topic with all its records, as DeleteTopics does.'), h('div', { class: 'inline' }, remove, deleted)),
    );
    return {
      async refresh() {
        const topic = await api('GET', path);
        const records = topic.partitions.reduce((n, p) => n + p.high_watermark - p.log_start_offset, 0);
        replace(
          summary,
          h('div', { class: 'card' },
            h('h2', {}, 'Partitions'),
            details([
              ['Partitions', h('span', { id: 'topic-partitions-count' }, count(topic.partitions.length))],
              ['Records', count(records)],
            ]),
            table(PARTITION_COLUMNS, topic.partitions, { rowAttributes: (p) => ({ 'data-partition': p.partition }) })),
        );
        if (!settingsDrawn) {
          settingsDrawn = true;
          replace(settings, settingsForm(path, topic, settingsResult, () => {
            settingsDrawn = false;
            refreshNow();
          }));
        }
      },
    };
  },
};
