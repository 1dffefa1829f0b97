//! What a command prints: with `--json`, the API's own JSON (pretty-printed, for `jq` and
//! scripts); otherwise a view of it for people — tables with an upper-case header line,
//! `FIELD  value` lines, or a sentence. A view names the JSON fields it shows, so both
//! forms always come from the same answer.

use serde_json::Value;

/// A column or a field: its heading and the dotted path of its JSON value
/// (`message_stats.publish`; a key that holds dots, `config.retention.ms`, is found too);
/// a path ending in `#` shows the length of the array there (`partitions#`).
pub(crate) type Column = (&'static str, &'static str);

/// One part of a view.
#[derive(Debug, Clone)]
pub(crate) enum Part {
    /// A table of the array at `rows` (`""`: the answer itself), one row per element.
    Table {
        /// Where the rows are.
        rows: &'static str,
        /// What each row shows.
        columns: &'static [Column],
    },
    /// One line per field of the answer.
    Fields(&'static [Column]),
    /// One line per member of the object at this path, in its order.
    Map(&'static str),
    /// A sentence.
    Text(String),
}

/// A command's result.
#[derive(Debug, Clone)]
pub(crate) struct Output {
    /// What `--json` prints.
    json: Value,
    /// What is printed otherwise, part after part.
    view: Vec<Part>,
}

impl Output {
    /// `json`, shown as `view`.
    pub(crate) fn new(json: Value, view: Vec<Part>) -> Self {
        Self { json, view }
    }

    /// The array `json` as a table of `columns`.
    pub(crate) fn table(json: Value, columns: &'static [Column]) -> Self {
        Self::new(json, vec![Part::Table { rows: "", columns }])
    }

    /// The object `json` as lines of `fields`.
    pub(crate) fn fields(json: Value, fields: &'static [Column]) -> Self {
        Self::new(json, vec![Part::Fields(fields)])
    }

    /// A change done: `json` is the API's answer (or what was done), `sentence` says it.
    pub(crate) fn done(json: Value, sentence: String) -> Self {
        Self::new(json, vec![Part::Text(sentence)])
    }

    /// The text to print: the JSON when `json`, else the view.
    pub(crate) fn render(&self, json: bool) -> String {
        if json {
            let mut text = serde_json::to_string_pretty(&self.json).unwrap_or_default();
            text.push('\n');
            return text;
        }
        let parts: Vec<String> = self.view.iter().map(|p| self.part(p)).collect();
        parts.join("\n")
    }

    fn part(&self, part: &Part) -> String {
        match part {
            Part::Table { rows, columns } => {
                let rows = at(&self.json, rows).as_array().cloned().unwrap_or_default();
                let mut lines = vec![columns.iter().map(|(h, _)| (*h).to_owned()).collect()];
                for row in &rows {
                    lines.push(columns.iter().map(|(_, p)| cell_at(row, p)).collect());
                }
                aligned(&lines)
            }
            Part::Fields(fields) => aligned(
                &fields
                    .iter()
                    .map(|(h, p)| vec![(*h).to_owned(), cell_at(&self.json, p)])
                    .collect::<Vec<_>>(),
            ),
            Part::Map(path) => {
                let members: Vec<Vec<String>> = at(&self.json, path)
                    .as_object()
                    .map(|o| o.iter().map(|(k, v)| vec![k.clone(), cell(v)]).collect())
                    .unwrap_or_default();
                aligned(&members)
            }
            Part::Text(sentence) => format!("{sentence}\n"),
        }
    }
}

/// The value at dotted `path` in `value` (`null` where there is none): a key holding the
/// whole rest of the path is taken before the path is split at its next dot.
fn at<'a>(value: &'a Value, path: &str) -> &'a Value {
    if path.is_empty() {
        return value;
    }
    if let Some(v) = value.get(path) {
        return v;
    }
    match path.split_once('.') {
        Some((key, rest)) => value.get(key).map_or(&Value::Null, |v| at(v, rest)),
        None => &Value::Null,
    }
}

/// The cell of [`Column`] path `path` in `value`.
fn cell_at(value: &Value, path: &str) -> String {
    match path.strip_suffix('#') {
        Some(path) => at(value, path).as_array().map_or(0, Vec::len).to_string(),
        None => cell(at(value, path)),
    }
}

/// A JSON value as a table cell: strings bare, lists of strings joined by commas.
fn cell(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Array(items) if items.iter().all(Value::is_string) => items
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(","),
        other => other.to_string(),
    }
}

/// `lines` of cells in columns two spaces apart, the last column unpadded.
fn aligned(lines: &[Vec<String>]) -> String {
    let columns = lines.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|i| {
            lines
                .iter()
                .filter_map(|l| l.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for line in lines {
        let mut text = String::new();
        for (i, c) in line.iter().enumerate() {
            if i + 1 < line.len() {
                text.push_str(&format!("{c:<w$}  ", w = widths[i]));
            } else {
                text.push_str(c);
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tables_align_their_columns_under_a_header() {
        let rows = json!([
            {"name": "orders", "messages": 12, "tags": ["a", "b"]},
            {"name": "q", "messages": 0, "tags": []},
        ]);
        let out = Output::table(
            rows,
            &[("NAME", "name"), ("MESSAGES", "messages"), ("TAGS", "tags")],
        );
        assert_eq!(
            out.render(false),
            "NAME    MESSAGES  TAGS\norders  12        a,b\nq       0\n"
        );
    }

    #[test]
    fn fields_follow_dotted_paths_and_json_is_the_answer() {
        let overview = json!({
            "node": "ferry@h",
            "object_totals": {"queues": 3},
            "config": {"retention.ms": 60000},
            "partitions": [{}, {}],
        });
        let out = Output::fields(
            overview.clone(),
            &[
                ("NODE", "node"),
                ("QUEUES", "object_totals.queues"),
                ("RETENTION", "config.retention.ms"),
                ("PARTITIONS", "partitions#"),
                ("GONE", "x.y"),
            ],
        );
        assert_eq!(
            out.render(false),
            "NODE        ferry@h\nQUEUES      3\nRETENTION   60000\nPARTITIONS  2\nGONE\n"
        );
        let printed: Value = serde_json::from_str(&out.render(true)).unwrap();
        assert_eq!(printed, overview);
    }
}
