// One Kafka topic: its partitions with their offsets (GET /api/ferry/kafka/topics/NAME),
// a record browser (GET …/records: a partition's records from an offset, a time or the
// latest, with key, headers and value shown as text, JSON or hex), its settings, changed
// as IncrementalAlterConfigs changes them (PUT …/config: a cleared field goes back to its
// default), and its deletion (DELETE …, click twice).

import { api, apiPath, confirmButton, count, details, h, link, refreshNow, replace, say, table } from '../core.js';

const PARTITION_COLUMNS = [
  { title: 'Partition', cell: (p) => count(p.partition), numeric: true },
  { title: 'Log start', cell: (p) => h('span', { class: 'log-start' }, count(p.log_start_offset)), numeric: true },
  { title: 'High watermark', cell: (p) => h('span', { class: 'high-watermark' }, count(p.high_watermark)), numeric: true },
  { title: 'Last stable', cell: (p) => count(p.last_stable_offset), numeric: true },
  { title: 'Records', cell: (p) => count(p.high_watermark - p.log_start_offset), numeric: true },
];

/** The bytes of an API `{base64, text}` as a Uint8Array. */
function decoded(bytes) {
  return Uint8Array.from(atob(bytes.base64), (c) => c.charCodeAt(0));
}

/** Bytes as hex, 16 to a line, each line led by its position. */
function hexDump(bytes) {
  const data = decoded(bytes);
  const lines = [];
  for (let at = 0; at < data.length; at += 16) {
    const row = Array.from(data.slice(at, at + 16), (b) => b.toString(16).padStart(2, '0')).join(' ');
    lines.push(`${at.toString(16).padStart(6, '0')}  ${row}`);
  }
  return lines.join('\n');
}

/** `bytes` (a key, value or header value) shown as `format`: text, json or hex. */
function shown(bytes, format) {
  if (bytes === null) return h('span', { class: 'muted' }, 'null');
  if (format === 'hex') return hexDump(bytes);
  if (bytes.text === null) return [h('span', { class: 'muted' }, 'not UTF-8, as hex:\n'), hexDump(bytes)];
  if (format === 'json') {
    try {
      return JSON.stringify(JSON.parse(bytes.text), null, 2);
    } catch {
      return [h('span', { class: 'muted' }, 'not JSON, as text:\n'), bytes.text];
    }
  }
  return bytes.text;
}

function record(r, format) {
  const text = (bytes) => (bytes === null ? 'null' : bytes.text ?? hexDump(bytes));
  return h(
    'div',
    { class: 'card message record', 'data-offset': r.offset },
    details([
      ['Offset', count(r.offset)],
      ['Timestamp', typeof r.timestamp === 'number' && r.timestamp >= 0 ? `${new Date(r.timestamp).toISOString()} (${r.timestamp})` : '–'],
      ['Key', h('code', { class: 'key' }, text(r.key))],
      ['Headers', r.headers.length ? r.headers.map((hd) => h('div', { class: 'header' }, h('code', {}, `${hd.name}: ${text(hd.value)}`))) : '–'],
      ['Value', h('span', { class: 'muted' }, r.value === null ? 'null (a tombstone)' : `${count(decoded(r.value).length)} bytes`)],
    ]),
    r.value === null ? null : h('pre', { class: 'payload value' }, shown(r.value, format)),
  );
}

/**
 * The record browser: a partition's records from an offset, a time (milliseconds or a
 * date) or the latest; *Next* goes on from the last record shown; the format redraws the
 * last answer without asking again.
 */
function browser(path, topic) {
  const partition = h('select', { id: 'browse-partition' });
  const from = h(
    'select',
    { id: 'browse-from' },
    h('option', { value: 'offset' }, 'Offset'),
    h('option', { value: 'timestamp' }, 'Time'),
    h('option', { value: 'latest' }, 'Latest'),
  );
  const offset = h('input', { id: 'browse-offset', type: 'number', min: 0, value: 0 });
  const time = h('input', { id: 'browse-time', placeholder: 'ms or 2026-11-28T13:00:00Z' });
  const limit = h('input', { id: 'browse-limit', type: 'number', min: 1, max: 500, value: 20 });
  const format = h(
    'select',
    { id: 'browse-format' },
    h('option', { value: 'text' }, 'Text'),
    h('option', { value: 'json' }, 'JSON'),
    h('option', { value: 'hex' }, 'Hex'),
  );
  const submit = h('button', { id: 'browse-submit', type: 'submit' }, 'Show records');
  const next = h('button', { id: 'browse-next', type: 'button', class: 'plain', disabled: true }, 'Next ›');
  const status = h('span', { id: 'browse-status', class: 'result', role: 'status' });
  const output = h('div', { id: 'browse-output', class: 'wide' });
  const offsetLabel = h('label', {}, 'Offset ', offset);
  const timeLabel = h('label', {}, 'Time ', time);
  let last = null;
  let partitions = topic.partitions;

  const draw = () => {
    if (!last) return;
    const p = last;
    status.textContent = p.records.length
      ? `Offsets ${count(p.records[0].offset)} to ${count(p.records.at(-1).offset)} of partition ${p.partition} (log ${count(p.log_start_offset)}–${count(p.high_watermark)}).`
      : `No records from offset ${count(p.from_offset)} (log ${count(p.log_start_offset)}–${count(p.high_watermark)}).`;
    status.className = 'result';
    next.disabled = p.next_offset >= p.last_stable_offset;
    replace(output, p.records.map((r) => record(r, format.value)));
  };
  const look = async (query) => {
    submit.disabled = true;
    try {
      last = await api('GET', `${path}/records?${new URLSearchParams(query)}`);
      draw();
    } catch (e) {
      say(status, e.message, true);
    } finally {
      submit.disabled = false;
    }
  };
  const changed = () => {
    offsetLabel.hidden = from.value !== 'offset';
    timeLabel.hidden = from.value !== 'timestamp';
  };
  from.addEventListener('change', changed);
  format.addEventListener('change', draw);
  next.addEventListener('click', () => look({ partition: last.partition, offset: last.next_offset, limit: limit.value }));
  changed();

  const form = h(
    'form',
    { class: 'card form', id: 'records' },
    h('h2', {}, 'Records'),
    h('div', { class: 'inline' }, h('label', {}, 'Partition ', partition), h('label', {}, 'From ', from), offsetLabel, timeLabel, h('label', {}, 'Count ', limit), h('label', {}, 'Show values as ', format)),
    h('div', { class: 'inline' }, submit, next, status),
    output,
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const query = { partition: partition.value, limit: limit.value };
    if (from.value === 'offset') query.offset = offset.value || 0;
    if (from.value === 'timestamp') {
      const t = time.value.trim();
      const ms = /^\d+$/.test(t) ? Number(t) : Date.parse(t);
      if (Number.isNaN(ms)) {
        say(status, 'The time is neither milliseconds nor a date.', true);
        return;
      }
      query.timestamp = ms;
    }
    if (from.value === 'latest') {
      const p = partitions.find((x) => String(x.partition) === partition.value) || { log_start_offset: 0, high_watermark: 0 };
      query.offset = Math.max(p.log_start_offset, p.high_watermark - Number(limit.value));
    }
    look(query);
  });
  return {
    form,
    /** Keeps the partition list (and the offsets Latest counts back from) current. */
    update(t) {
      partitions = t.partitions;
      if (partition.options.length !== t.partitions.length) {
        const chosen = partition.value;
        replace(partition, t.partitions.map((p) => h('option', { value: p.partition }, String(p.partition))));
        if (chosen !== '' && t.partitions.some((p) => String(p.partition) === chosen)) partition.value = chosen;
      }
    },
  };
}

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
      say(result, `Saved ${Object.keys(changes).join(', ')}.`);
      done();
    } catch (e) {
      say(result, e.message, true);
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
    const browsing = h('div');
    let browse = null;
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
      browsing,
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
        if (!browse) {
          browse = browser(path, topic);
          replace(browsing, browse.form);
        }
        browse.update(topic);
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
