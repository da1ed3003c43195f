//! `fixture-model --script FILE [--port N] [--log FILE]`: the scripted model server (see
//! `maljan_testkit::model`). Prints its base URL (`http://127.0.0.1:PORT/v1`) on stdout once it
//! listens.

use std::io::Write;

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut script, mut port, mut log) = (None, 0u16, None);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--script" => script = args.next(),
            "--port" => port = args.next().and_then(|p| p.parse().ok()).unwrap_or(0),
            "--log" => log = args.next().map(std::path::PathBuf::from),
            other => {
                eprintln!("fixture-model: unknown argument {other}");
                std::process::exit(2);
            }
        }
    }
    let Some(script) = script else {
        eprintln!("fixture-model: --script FILE is required");
        std::process::exit(2);
    };
    let text = std::fs::read_to_string(&script).unwrap_or_else(|e| {
        eprintln!("fixture-model: {script}: {e}");
        std::process::exit(2);
    });
    let script = maljan_testkit::model::ModelScript::parse(&text).unwrap_or_else(|e| {
        eprintln!("fixture-model: {e}");
        std::process::exit(2);
    });
    let listener = std::net::TcpListener::bind(("127.0.0.1", port)).expect("bind 127.0.0.1");
    let addr = listener.local_addr().expect("local addr");
    println!("http://{addr}/v1");
    let _ = std::io::stdout().flush();
    maljan_testkit::model::serve(listener, script, log);
}
