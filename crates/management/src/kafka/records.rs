//! `GET /api/ferry/kafka/topics/{topic}/records?partition=P&offset=O|timestamp=T&limit=N`:
//! the records of one partition, for the web UI's record browser (users tagged
//! `monitoring` or `administrator`), read as a `read_committed` Fetch reads them through
//! [`KafkaAdmin::records`](ferry_kafka::admin::KafkaAdmin::records). Keys, values and
//! header values are bytes: each comes as `{"base64", "text"}` (`text` when the bytes are
//! UTF-8, else null), or null for Kafka's null.

use crate::Api;
use crate::administrator::{monitor, store_failed};
use crate::error::{ApiError, ApiResult};
use crate::login::Principal;
use crate::reply::Json;
use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::routing::get;
use base64::Engine as _;
use ferry_kafka::admin::{BrowseError, BrowseFrom, BrowsedRecord, MAX_RECORDS, RecordsPage};
use serde_json::{Value, json};

/// Records answered when the query names no `limit`.
const DEFAULT_LIMIT: usize = 20;

/// The routes of this family.
pub(crate) fn routes() -> Router<Api> {
    Router::new().route("/api/ferry/kafka/topics/{topic}/records", get(records))
}

impl From<BrowseError> for ApiError {
    fn from(e: BrowseError) -> Self {
        match e {
            BrowseError::UnknownTopic(_) => ApiError::not_found(),
            BrowseError::UnknownPartition { .. } => ApiError::bad_request(e.to_string()),
            BrowseError::Log(e) => store_failed(e),
        }
    }
}

/// What the query string asks: the partition, where to start, how many.
#[derive(Debug, PartialEq, Eq)]
struct Look {
    partition: i32,
    from: BrowseFrom,
    limit: usize,
}

/// Parses `partition` (default 0), `offset` or `timestamp` (ms; neither: the log start)
/// and `limit` (1 to [`MAX_RECORDS`], default [`DEFAULT_LIMIT`]).
fn look(query: Option<&str>) -> ApiResult<Look> {
    let mut partition = 0;
    let mut from = BrowseFrom::Offset(0);
    let mut limit = DEFAULT_LIMIT;
    let mut started = None;
    for (key, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        let bad = |what: &str| {
            ApiError::bad_request(format!("parameter '{key}' must be {what}, not '{value}'"))
        };
        match key.as_ref() {
            "partition" => {
                partition = value
                    .parse()
                    .ok()
                    .filter(|p| *p >= 0)
                    .ok_or_else(|| bad("a partition number"))?;
            }
            "offset" | "timestamp" => {
                if let Some(other) = started.replace(key.to_string()) {
                    return Err(ApiError::bad_request(format!(
                        "give 'offset' or 'timestamp', not both ('{other}' and '{key}')"
                    )));
                }
                let n: i64 = value
                    .parse()
                    .ok()
                    .filter(|n| *n >= 0)
                    .ok_or_else(|| bad("an integer of at least 0"))?;
                from = if key == "offset" {
                    BrowseFrom::Offset(n)
                } else {
                    BrowseFrom::Timestamp(n)
                };
            }
            "limit" => {
                limit = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=MAX_RECORDS).contains(n))
                    .ok_or_else(|| bad(&format!("an integer from 1 to {MAX_RECORDS}")))?;
            }
            _ => {
                return Err(ApiError::bad_request(format!(
                    "unknown parameter '{key}' (partition, offset, timestamp, limit)"
                )));
            }
        }
    }
    Ok(Look {
        partition,
        from,
        limit,
    })
}

/// Bytes as `{"base64", "text"}`, or null.
fn bytes_json(bytes: Option<&[u8]>) -> Value {
    match bytes {
        None => Value::Null,
        Some(b) => json!({
            "base64": base64::engine::general_purpose::STANDARD.encode(b),
            "text": std::str::from_utf8(b).ok(),
        }),
    }
}

fn record_json(r: &BrowsedRecord) -> Value {
    json!({
        "offset": r.offset,
        "timestamp": r.record.timestamp_ms,
        "key": bytes_json(r.record.key.as_deref()),
        "headers": r.record.headers.iter().map(|(name, value)| json!({
            "name": name,
            "value": bytes_json(value.as_deref()),
        })).collect::<Vec<_>>(),
        "value": bytes_json(r.record.value.as_deref()),
    })
}

fn page_json(topic: &str, partition: i32, page: &RecordsPage) -> Value {
    json!({
        "topic": topic,
        "partition": partition,
        "log_start_offset": page.log_start_offset,
        "high_watermark": page.high_watermark,
        "last_stable_offset": page.last_stable_offset,
        "from_offset": page.from,
        "next_offset": page.next_offset,
        "records": page.records.iter().map(record_json).collect::<Vec<_>>(),
    })
}

/// `GET /api/ferry/kafka/topics/{topic}/records`.
async fn records(
    State(api): State<Api>,
    principal: Principal,
    Path(topic): Path<String>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<Value>> {
    monitor(&principal)?;
    let look = look(query.as_deref())?;
    let page = api
        .kafka
        .records(&topic, look.partition, look.from, look.limit)
        .await?;
    Ok(Json(page_json(&topic, look.partition, &page)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_look_starts_at_an_offset_or_a_time_and_is_bounded() {
        assert_eq!(
            look(None).unwrap(),
            Look {
                partition: 0,
                from: BrowseFrom::Offset(0),
                limit: DEFAULT_LIMIT
            }
        );
        assert_eq!(
            look(Some("partition=2&timestamp=1700000000000&limit=5")).unwrap(),
            Look {
                partition: 2,
                from: BrowseFrom::Timestamp(1_700_000_000_000),
                limit: 5
            }
        );
        assert_eq!(look(Some("offset=7")).unwrap().from, BrowseFrom::Offset(7));
        for refused in [
            "offset=1&timestamp=2",
            "limit=0",
            "limit=501",
            "partition=-1",
            "offset=x",
            "count=3",
        ] {
            assert!(look(Some(refused)).is_err(), "{refused}");
        }
    }

    #[test]
    fn bytes_have_a_text_form_only_when_they_are_utf8() {
        assert_eq!(
            bytes_json(Some(b"caf\xc3\xa9")),
            json!({"base64": "Y2Fmw6k=", "text": "café"})
        );
        assert_eq!(
            bytes_json(Some(&[0xff, 0x00])),
            json!({"base64": "/wA=", "text": null})
        );
        assert_eq!(bytes_json(None), Value::Null);
    }
}
