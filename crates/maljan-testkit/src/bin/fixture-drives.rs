//! `fixture-drives [--port N] [--token T] [--gcs-key FILE]`: the SaaS drive and Google Cloud
//! Storage fixture (see `maljan_testkit::drives`). Prints its base URL (`http://127.0.0.1:PORT`) on
//! stdout once it listens; each service is under the name of its real host
//! (`/api.dropboxapi.com/2/…`, `/storage.googleapis.com/BUCKET/OBJECT`). GCS trusts the service
//! account whose JSON key FILE holds.

use std::io::Write;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (mut port, mut token, mut gcs_key) = (0u16, "fixture-token".to_string(), None);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--port" => port = args.next().and_then(|p| p.parse().ok()).unwrap_or(0),
            "--token" => token = args.next().unwrap_or(token),
            "--gcs-key" => gcs_key = args.next(),
            other => {
                eprintln!("fixture-drives: unknown argument {other}");
                std::process::exit(2);
            }
        }
    }
    let fixture = match gcs_key {
        None => maljan_testkit::drives::Fixture::new(&token),
        Some(file) => std::fs::read_to_string(&file)
            .map_err(|e| e.to_string())
            .and_then(|key| maljan_testkit::drives::Fixture::with_gcs_key(&token, &key))
            .unwrap_or_else(|e| {
                eprintln!("fixture-drives: --gcs-key {file}: {e}");
                std::process::exit(2);
            }),
    };
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("bind 127.0.0.1");
    let addr = listener.local_addr().expect("local addr");
    println!("http://{addr}");
    let _ = std::io::stdout().flush();
    maljan_testkit::drives::serve(listener, fixture).await;
}
