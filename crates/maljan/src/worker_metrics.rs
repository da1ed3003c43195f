//! `maljan worker --metrics-listen ADDR`: the worker's runtime metrics (maljan-client's
//! `metrics`: calls, errors by code, breaker rests, upload bytes) and the queue's depth, in the
//! Prometheus text format at `http://ADDR/metrics`. Loopback unless the operator names another
//! address; nothing else is served there.

use std::{net::SocketAddr, sync::Arc};

use maljan_client::Runtime;

/// The queue is counted up to this many waiting jobs (the list query's limit).
const DEPTH_LIMIT: usize = 100_000;

/// Binds `addr` now (a taken port is an error at start, not later) and serves in the background.
pub async fn serve(addr: SocketAddr, runtime: Arc<Runtime>) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen for metrics on {addr}: {e}"))?;
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let runtime = runtime.clone();
            async move {
                let counted = tokio::task::spawn_blocking({
                    let runtime = runtime.clone();
                    move || runtime.ledger().queued_jobs(Some("queued"), DEPTH_LIMIT)
                })
                .await;
                if let Ok(Ok(queued)) = counted {
                    runtime.metrics().set_queue_depth(queued.len() as i64);
                }
                (
                    [(
                        http::header::CONTENT_TYPE,
                        maljan_client::metrics::CONTENT_TYPE,
                    )],
                    runtime.render_metrics(),
                )
            }
        }),
    );
    tracing::info!(
        "worker metrics on http://{}/metrics",
        listener.local_addr()?
    );
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!("the metrics listener stopped: {e}");
        }
    });
    Ok(())
}
