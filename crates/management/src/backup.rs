//! `GET /api/ferry/backup` (administrators): the whole store at one read version, streamed
//! as a backup file ([`ferry_store::backup`]) while the daemon keeps serving. `ferry
//! backup` and curl save it; `ferry restore` loads it into an empty store.
//!
//! The body is streamed frame by frame as the pinned state is read, so a store larger
//! than memory is backed up in a few megabytes; the `X-Ferry-Read-Version` header names
//! the version. A failure after the first bytes cannot change the status any more: the
//! stream stops, and the file lacks its end frame, which `ferry restore` refuses.

use super::Api;
use super::administrator::{administrator, store_failed};
use super::error::{ApiError, ApiResult};
use super::login::Principal;
use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use ferry_store::backup::{Backup, BackupError};

/// The routes of this family.
pub(crate) fn routes() -> Router<Api> {
    Router::new().route("/api/ferry/backup", get(backup))
}

/// `GET /api/ferry/backup`.
async fn backup(State(api): State<Api>, principal: Principal) -> ApiResult<Response> {
    administrator(&principal)?;
    let store = api.resources.store.clone();
    let backup = match Backup::start(&store).await {
        Ok(backup) => backup,
        Err(e @ BackupError::Unsupported(_)) => return Err(ApiError::bad_request(e.to_string())),
        Err(e) => return Err(store_failed(e)),
    };
    let version = backup.read_version().unwrap_or_default();
    tracing::info!(read_version = version, user = %principal.user.name, "backup started");
    let frames = futures::stream::try_unfold(backup, move |mut backup| async move {
        let (next, backup) = tokio::task::spawn_blocking(move || (backup.next_bytes(), backup))
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        match next {
            Ok(Some(bytes)) => Ok(Some((bytes, backup))),
            Ok(None) => {
                tracing::info!(read_version = version, "backup streamed");
                Ok(None)
            }
            Err(e) => {
                tracing::warn!(read_version = version, error = %e, "backup failed");
                Err(std::io::Error::other(e.to_string()))
            }
        }
    });
    Ok((
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_owned()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"ferry-{version}.backup\""),
            ),
            (
                header::HeaderName::from_static("x-ferry-read-version"),
                version.to_string(),
            ),
        ],
        Body::from_stream(frames),
    )
        .into_response())
}
