//! `unpack` and extract_members on a UPX-packed program the test builds: a mingw-w64 program
//! whose imports UPX hides, packed with the host's upx. The unpacked image is restored on a
//! private copy in the server's work directory (the samples' folder is never written to) and shows
//! the program's real imports again; extract_members gives it as a member unpacked from its
//! parent. Needs x86_64-w64-mingw32-gcc and upx (`upx`/`upx-ucl` on PATH, or MALJAN_UPX):
//! `eval "$(scripts/peers.sh)"` provides both; without them these tests fail, they do not skip.

mod server;

use std::{path::Path, process::Command};

use maljan_analysis::unpack::{Budget, unpack_upx, upx_packed, upx_program};
use serde_json::{Value, json};
use server::Server;

/// A program whose second and third imports of each library are ones UPX's stub does not keep.
const PROGRAM: &str = r#"
#include <windows.h>
int main(void) {
    char name[64];
    DWORD n = sizeof name;
    if (GetComputerNameA(name, &n) && GetTickCount64() > 0) {
        HWND w = GetForegroundWindow();
        SetWindowTextA(w, name);
        MessageBoxA(NULL, name, "host", MB_OK);
    }
    return 0;
}
"#;

/// (the program, the program packed by upx), built in `dir`.
fn build(dir: &Path) -> (Vec<u8>, Vec<u8>) {
    let upx = upx_program()
        .expect("upx is not on PATH and MALJAN_UPX is not set: run `eval \"$(scripts/peers.sh)\"`");
    std::fs::write(dir.join("hostname.c"), PROGRAM).unwrap();
    let plain = dir.join("hostname.exe");
    let status = Command::new("x86_64-w64-mingw32-gcc")
        .args(["-O2", "-s", "-o"])
        .arg(&plain)
        .arg(dir.join("hostname.c"))
        .arg("-luser32")
        .status()
        .expect("x86_64-w64-mingw32-gcc is not installed: run `eval \"$(scripts/peers.sh)\"`");
    assert!(status.success(), "mingw-w64 could not build the program");
    let packed = dir.join("hostname-upx.exe");
    let status = Command::new(&upx)
        .args(["-q", "-q", "-o"])
        .arg(&packed)
        .arg(&plain)
        .status()
        .expect("run upx");
    assert!(status.success(), "upx could not pack the program");
    (
        std::fs::read(plain).unwrap(),
        std::fs::read(packed).unwrap(),
    )
}

/// Every imported function name pe_info reads from `args`' file.
async fn imports(srv: &Server, args: Value) -> Vec<String> {
    let (v, is_error) = srv.call("pe_info", args).await;
    assert!(!is_error, "{v}");
    v["imports"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|d| d["functions"].as_array().cloned().unwrap_or_default())
        .filter_map(|f| f.as_str().map(str::to_string))
        .collect()
}

#[test]
fn upx_restores_the_image_on_a_private_copy() {
    let dir = tempfile::tempdir().unwrap();
    let (plain, packed) = build(dir.path());
    assert!(upx_packed(&packed));
    assert!(!upx_packed(&plain));
    let scratch = dir.path().join("scratch");
    let image = unpack_upx(
        &upx_program().unwrap(),
        &packed,
        &scratch,
        Budget::default(),
        &|| false,
    )
    .expect("upx -d restores the image");
    assert!(!upx_packed(&image));
    assert!(image.starts_with(b"MZ"));
    assert!(image.len() > packed.len(), "the image is larger unpacked");
    // The private copy is gone; only the scratch directory (0700) stays.
    assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 0);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&scratch).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    // A size budget below the image's size is refused, not written past.
    let small = Budget {
        max_bytes: packed.len() as u64,
        ..Budget::default()
    };
    let refused = unpack_upx(&upx_program().unwrap(), &packed, &scratch, small, &|| false);
    assert!(refused.is_err(), "an image past max_bytes is refused");
}

#[tokio::test]
async fn the_unpack_tool_writes_the_image_in_the_work_dir_with_its_real_imports() {
    let dir = tempfile::tempdir().unwrap();
    let (plain, packed) = build(dir.path());
    let srv = Server::new(&[("hostname-upx.exe", packed), ("hostname.exe", plain)]);
    let before: Vec<_> = std::fs::read_dir(&srv.samples).unwrap().collect();

    let hidden = imports(&srv, json!({"path": srv.path("hostname-upx.exe")})).await;
    assert!(
        !hidden.iter().any(|f| f == "GetComputerNameA"),
        "UPX hides the program's imports: {hidden:?}"
    );
    let (v, is_error) = srv
        .call("unpack", json!({"path": srv.path("hostname-upx.exe")}))
        .await;
    assert!(!is_error, "{v}");
    assert_eq!(v["packer"], "UPX", "{v}");
    assert_eq!(v["unpacked"]["source"], "unpacked", "{v}");
    assert_eq!(v["unpacked"]["kind"], "pe", "{v}");
    let carved = v["unpacked"]["carved_path"].as_str().expect("written");
    assert!(
        Path::new(carved).starts_with(&srv.work),
        "{carved} is not under the work directory"
    );
    let real = imports(&srv, json!({"carved_path": carved})).await;
    for f in ["GetComputerNameA", "GetForegroundWindow", "SetWindowTextA"] {
        assert!(real.iter().any(|x| x == f), "{f} not in {real:?}");
    }
    assert_eq!(
        std::fs::read_dir(&srv.samples).unwrap().count(),
        before.len(),
        "nothing is written beside the samples"
    );

    // A program UPX did not pack has nothing to unpack: an answer, not an error.
    let (v, is_error) = srv
        .call("unpack", json!({"path": srv.path("hostname.exe")}))
        .await;
    assert!(!is_error, "{v}");
    assert!(v["packer"].is_null() && v["unpacked"].is_null(), "{v}");
}

#[tokio::test]
async fn extract_members_gives_the_unpacked_image_as_a_child() {
    let dir = tempfile::tempdir().unwrap();
    let (_, packed) = build(dir.path());
    let srv = Server::new(&[("hostname-upx.exe", packed)]);
    let (v, is_error) = srv
        .call(
            "extract_members",
            json!({"path": srv.path("hostname-upx.exe")}),
        )
        .await;
    assert!(!is_error, "{v}");
    let members = v["members"].as_array().expect("members");
    let unpacked = members
        .iter()
        .find(|m| m["source"] == "unpacked")
        .unwrap_or_else(|| panic!("no unpacked member: {v}"));
    assert_eq!(unpacked["kind"], "pe");
    assert_eq!(unpacked["name"], "upx-unpacked.exe");
    let carved = unpacked["carved_path"].as_str().unwrap();
    let real = imports(&srv, json!({"carved_path": carved})).await;
    assert!(real.iter().any(|f| f == "GetComputerNameA"), "{real:?}");
    // The unpacked image is not packed: opening it in turn gives no further image.
    let (v2, is_error) = srv
        .call("extract_members", json!({"carved_path": carved}))
        .await;
    assert!(!is_error, "{v2}");
    assert!(
        !v2["members"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|m| m["source"] == "unpacked"),
        "{v2}"
    );
    // A dry run writes nothing, so it makes no private copy and unpacks nothing.
    let (v3, _) = srv
        .call(
            "extract_members",
            json!({"path": srv.path("hostname-upx.exe"), "dry_run": true}),
        )
        .await;
    assert!(
        !v3["members"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|m| m["source"] == "unpacked"),
        "{v3}"
    );
}

#[test]
fn the_manifest_names_upx_as_unpack_s_optional_dependency() {
    let srv = Server::new(&[]);
    let m = srv.server.manifest();
    let t = m.tool("unpack").expect("the unpack tool");
    assert_eq!(t.optional_dependency.as_deref(), Some("upx"));
    assert_eq!(t.timeout_s, Some(120.0));
    // The peers provide upx (MALJAN_UPX), so here it is available.
    assert!(
        upx_program().is_some(),
        "run `eval \"$(scripts/peers.sh)\"`"
    );
    assert!(t.available, "{t:?}");
}
