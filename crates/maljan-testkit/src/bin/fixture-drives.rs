//! `fixture-drives [--port N] [--token T]`: the SaaS drive fixture (see
//! `maljan_testkit::drives`). Prints its base URL (`http://127.0.0.1:PORT`) on stdout once it
//! listens; each drive is under the name of its real host (`/api.dropboxapi.com/2/…`).

use std::io::Write;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (mut port, mut token) = (0u16, "fixture-token".to_string());
    while let Some(a) = args.next() {
        match a.as_str() {
            "--port" => port = args.next().and_then(|p| p.parse().ok()).unwrap_or(0),
            "--token" => token = args.next().unwrap_or(token),
            other => {
                eprintln!("fixture-drives: unknown argument {other}");
                std::process::exit(2);
            }
        }
    }
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("bind 127.0.0.1");
    let addr = listener.local_addr().expect("local addr");
    println!("http://{addr}");
    let _ = std::io::stdout().flush();
    maljan_testkit::drives::serve(listener, maljan_testkit::drives::Fixture::new(&token)).await;
}
