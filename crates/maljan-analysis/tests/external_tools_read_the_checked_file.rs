//! capa and FLOSS, which are other programs, read the sample through the descriptor this
//! server opened and checked under its roots (their fd 3, named `/dev/fd/3`), never by a path
//! they would open again themselves: a link swapped in after the check cannot lead them out.
//!
//! Stand-ins for both are put first on PATH (this file holds one test, so the process's PATH
//! is its own); each records the path it was given and the bytes it read there.

mod server;

use std::os::unix::fs::PermissionsExt;

use serde_json::json;
use server::Server;

#[tokio::test]
async fn capa_and_floss_are_handed_the_checked_descriptor() {
    let bin = tempfile::tempdir().unwrap();
    let seen = bin.path().join("seen");
    for (name, answer) in [
        ("capa", r#"{"rules":{}}"#),
        ("floss", r#"{"strings":{"static_strings":[]}}"#),
    ] {
        // The sample is the last argument; what is read there is recorded beside the path.
        let script = format!(
            "#!/bin/sh\nfor last; do :; done\nprintf '%s\\n' \"$last\" >> '{seen}'\ncat \"$last\" >> '{seen}'\nprintf '\\n' >> '{seen}'\necho '{answer}'\n",
            seen = seen.display()
        );
        let exe = bin.path().join(name);
        std::fs::write(&exe, script).unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // SAFETY: this file's only test, before any thread of its own reads the environment.
    unsafe { std::env::set_var("PATH", path) };

    let server = Server::new(&[("sample.bin", b"the checked bytes".to_vec())]);
    for tool in ["capa", "floss"] {
        let (answer, is_error) = server
            .call(tool, json!({"path": server.path("sample.bin")}))
            .await;
        assert!(!is_error, "{tool}: {answer}");
        assert_eq!(
            answer["read_path"],
            server.path("sample.bin"),
            "{tool}: {answer}"
        );
    }
    let seen = std::fs::read_to_string(&seen).unwrap();
    assert_eq!(
        seen, "/dev/fd/3\nthe checked bytes\n/dev/fd/3\nthe checked bytes\n",
        "what the programs were given and read"
    );
}
