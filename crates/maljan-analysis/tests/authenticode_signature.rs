//! A PE's Authenticode signature is checked, not just found: a signed DLL from the benign corpus
//! (pywinpty's winpty_conpty.dll, a PyPI wheel's Microsoft-signed build) is valid — its image
//! digest matches the signed one, the signer's signature over its attributes verifies and its
//! chain holds together — and the same file with one byte of code changed is not: the signature
//! no longer matches the file. detect_packer reports it. Needs MALJAN_CORPUS
//! (`eval "$(scripts/peers.sh)"`); without it these tests fail, they do not skip.

mod server;

use maljan_analysis::authenticode::check;
use serde_json::json;

const SIGNED: &str = "files/benign/pypi/pywinpty/winpty_conpty.dll";

fn signed() -> Vec<u8> {
    let corpus = std::env::var_os("MALJAN_CORPUS")
        .map(std::path::PathBuf::from)
        .expect("MALJAN_CORPUS is not set: run `eval \"$(scripts/peers.sh)\"`");
    std::fs::read(corpus.join(SIGNED)).expect("the corpus's signed DLL")
}

/// The file offset of the first executable section's raw data, and its size.
fn code_range(b: &[u8]) -> (usize, usize) {
    let pe = u32::from_le_bytes(b[0x3c..0x40].try_into().unwrap()) as usize;
    let nsec = u16::from_le_bytes(b[pe + 6..pe + 8].try_into().unwrap()) as usize;
    let opt = u16::from_le_bytes(b[pe + 20..pe + 22].try_into().unwrap()) as usize;
    let table = pe + 24 + opt;
    (0..nsec)
        .map(|i| table + i * 40)
        .find(|s| u32::from_le_bytes(b[s + 36..s + 40].try_into().unwrap()) & 0x2000_0000 != 0)
        .map(|s| {
            let size = u32::from_le_bytes(b[s + 16..s + 20].try_into().unwrap()) as usize;
            let ptr = u32::from_le_bytes(b[s + 20..s + 24].try_into().unwrap()) as usize;
            (ptr, size)
        })
        .expect("a code section")
}

#[test]
fn a_signed_dll_is_valid_with_its_chain() {
    let s = check(&signed()).expect("a signature");
    assert!(s.valid, "{s:#?}");
    assert!(s.digest_matches && s.message_digest_matches, "{s:#?}");
    assert_eq!(s.signer_signature_verified, Some(true));
    assert!(s.chain.len() >= 2, "{s:#?}");
    assert_eq!(s.chain[0].verified, Some(true));
    assert!(
        s.signer.as_deref().is_some_and(|n| n.contains("CN=")),
        "{s:#?}"
    );
    assert!(s.problems.is_empty(), "{:?}", s.problems);
}

#[test]
fn one_byte_changed_in_the_code_breaks_the_digest() {
    let mut b = signed();
    let (at, size) = code_range(&b);
    b[at + size / 2] ^= 0xFF;
    let s = check(&b).expect("the signature is still there");
    assert!(!s.valid);
    assert!(!s.digest_matches);
    // The signature itself still verifies: only the file changed.
    assert_eq!(s.signer_signature_verified, Some(true));
    assert!(
        s.problems
            .iter()
            .any(|p| p.contains("does not match the file")),
        "{:?}",
        s.problems
    );
}

#[test]
fn an_unsigned_program_has_no_signature() {
    let b = std::fs::read(
        std::path::Path::new(&std::env::var_os("MALJAN_CORPUS").expect("MALJAN_CORPUS"))
            .join("files/benign/wine/shutdown.exe"),
    )
    .expect("Wine's shutdown.exe");
    assert!(check(&b).is_none());
}

#[tokio::test]
async fn detect_packer_reports_the_signature() {
    let mut changed = signed();
    let (at, size) = code_range(&changed);
    changed[at + size / 2] ^= 0xFF;
    let srv = server::Server::new(&[("signed.dll", signed()), ("changed.dll", changed)]);
    let (v, is_error) = srv
        .call("detect_packer", json!({"path": srv.path("signed.dll")}))
        .await;
    assert!(!is_error, "{v}");
    assert_eq!(v["signature"]["valid"], true, "{v}");
    let (v, _) = srv
        .call("detect_packer", json!({"path": srv.path("changed.dll")}))
        .await;
    assert_eq!(v["signature"]["valid"], false, "{v}");
    assert_eq!(v["signature"]["digest_matches"], false, "{v}");
}
