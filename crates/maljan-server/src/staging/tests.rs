//! The staging store's unit tests.

use super::*;
use crate::errors::ErrorCode;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use proptest::prelude::*;

fn store(max: u64) -> (tempfile::TempDir, Arc<StagingStore>) {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = StagingOptions::new(dir.path().join("staging"));
    opts.max_sample_bytes = max;
    opts.max_open_uploads = 2;
    opts.gap_wait = Duration::from_millis(200);
    (dir, StagingStore::open(opts).unwrap())
}

/// Decodes `text` as a tool argument.
fn decode_text(text: &str) -> Result<Vec<u8>, ToolError> {
    decode_b64(text.to_string()).map(|d| d.as_slice().to_vec())
}

fn sha(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().mode() & 0o777
}

#[test]
fn put_verifies_and_stores_privately() {
    let (_d, s) = store(1 << 20);
    let path = s
        .put(
            "../../etc/evil.exe",
            B64.encode(b"MZ hello"),
            &sha(b"MZ hello"),
        )
        .unwrap();
    assert!(path.starts_with(s.dir()));
    assert_eq!(path.file_name().unwrap(), "evil.exe");
    assert_eq!(std::fs::read(&path).unwrap(), b"MZ hello");
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(path.parent().unwrap()), 0o700);
    assert_eq!(mode(s.dir()), 0o700);
    let err = s.put("x", B64.encode(b"abc"), &sha(b"abd")).unwrap_err();
    assert_eq!(err.code, ErrorCode::BadArgument);
    assert!(err.message.contains("mismatch"));
    let leftovers: Vec<_> = std::fs::read_dir(s.dir())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".part"))
        .collect();
    assert!(leftovers.is_empty(), "a half-written file stayed visible");
}

/// A sample staged again replaces the file at its path, and the old one's second name is gone
/// once its blocks are freed.
#[test]
fn staging_again_replaces_and_leaves_no_old_copy() {
    let (_d, s) = store(1 << 20);
    let first = s.put("a.bin", B64.encode(b"one"), &sha(b"one")).unwrap();
    let reader = std::fs::File::open(&first).unwrap();
    let again = s.put("a.bin", B64.encode(b"one"), &sha(b"one")).unwrap();
    assert_eq!(first, again);
    assert_eq!(std::fs::read(&again).unwrap(), b"one");
    // A reader that opened the old file still reads it whole.
    assert_eq!(std::io::read_to_string(reader).unwrap(), "one");
    let folder = again.parent().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let names: Vec<String> = std::fs::read_dir(folder)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        if names == ["a.bin"] {
            break;
        }
        assert!(Instant::now() < deadline, "left in the folder: {names:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn chunks_in_order_with_idempotent_repeats_and_gap_errors() {
    let (_d, s) = store(1 << 20);
    let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    let id = s
        .begin("sample.bin", &sha(&data), data.len() as u64)
        .unwrap();
    let parts: Vec<&[u8]> = data.chunks(4096).collect();
    assert_eq!(s.chunk(&id, 0, B64.encode(parts[0])).unwrap(), 0);
    assert_eq!(
        s.chunk(&id, 0, B64.encode(parts[0])).unwrap(),
        0,
        "a repeated chunk is idempotent"
    );
    assert!(
        s.chunk(&id, 0, B64.encode(parts[1])).is_err(),
        "a different chunk 0 is refused"
    );
    assert!(
        s.chunk(&id, 0, B64.encode(&parts[0][..100])).is_err(),
        "a shorter chunk 0 is refused"
    );
    let gap = s.chunk(&id, 2, B64.encode(parts[2])).unwrap_err();
    assert!(gap.message.contains("before chunk 1"), "{}", gap.message);
    s.chunk(&id, 1, B64.encode(parts[1])).unwrap();
    s.chunk(&id, 2, B64.encode(parts[2])).unwrap();
    let path = s.finish(&id).unwrap();
    assert_eq!(std::fs::read(path).unwrap(), data);
    let gone = s.finish(&id).unwrap_err();
    assert_eq!(
        gone.code,
        ErrorCode::BadArgument,
        "a finished upload is gone: {}",
        gone.message
    );
}

/// Two chunks in flight: the one that overtook its predecessor waits for it, and the file
/// ends up in order.
#[test]
fn a_chunk_ahead_of_its_turn_waits_for_the_one_before() {
    let (_d, s) = store(1 << 20);
    let data: Vec<u8> = (0..9000u32).map(|i| (i % 241) as u8).collect();
    let id = s
        .begin("sample.bin", &sha(&data), data.len() as u64)
        .unwrap();
    let parts: Vec<Vec<u8>> = data.chunks(3000).map(<[u8]>::to_vec).collect();
    let ahead = {
        let (s, id, part) = (s.clone(), id.clone(), parts[1].clone());
        std::thread::spawn(move || s.chunk(&id, 1, B64.encode(part)))
    };
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(s.chunk(&id, 0, B64.encode(&parts[0])).unwrap(), 0);
    assert_eq!(ahead.join().unwrap().unwrap(), 1);
    s.chunk(&id, 2, B64.encode(&parts[2])).unwrap();
    assert_eq!(std::fs::read(s.finish(&id).unwrap()).unwrap(), data);
}

#[test]
fn bounds_size_open_uploads_and_a_wrong_digest() {
    let (_d, s) = store(100);
    assert_eq!(
        s.begin("a", &sha(b""), 101).unwrap_err().code,
        ErrorCode::BadArgument
    );
    assert_eq!(
        s.put("a", B64.encode([0u8; 200]), "").unwrap_err().code,
        ErrorCode::BadArgument
    );
    let a = s.begin("a", &sha(b"x"), 1).unwrap();
    let _b = s.begin("b", &sha(b"x"), 1).unwrap();
    assert!(
        s.begin("c", &sha(b"x"), 1).is_err(),
        "only two uploads may be open"
    );
    s.chunk(&a, 0, B64.encode(b"y")).unwrap();
    assert!(s.finish(&a).unwrap_err().message.contains("mismatch"));
}

#[test]
fn abandoned_uploads_expire() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = StagingOptions::new(dir.path().join("s"));
    opts.upload_ttl = Duration::from_millis(1);
    let s = StagingStore::open(opts).unwrap();
    let id = s.begin("a", &sha(b"x"), 1).unwrap();
    std::thread::sleep(Duration::from_millis(5));
    s.evict_expired();
    let expired = s.chunk(&id, 0, B64.encode(b"x")).unwrap_err();
    assert_eq!(expired.code, ErrorCode::BadArgument, "{}", expired.message);
    assert_eq!(
        std::fs::read_dir(s.dir()).unwrap().count(),
        0,
        "the abandoned part file was removed"
    );
}

/// A part file a crashed process left goes when a store opens on the directory; a live
/// upload's stays through the sweeper's round.
#[test]
fn a_crashed_servers_part_file_is_swept() {
    let dir = tempfile::tempdir().unwrap();
    let staging = dir.path().join("s");
    let first = StagingStore::open(StagingOptions::new(&staging)).unwrap();
    let left = first.dir().join(".part-crashed");
    let f = std::fs::File::create(&left).unwrap();
    f.set_modified(std::time::SystemTime::now() - Duration::from_secs(3600))
        .unwrap();
    let id = first.begin("a", &sha(b"x"), 1).unwrap();
    first.sweep();
    assert!(!left.exists(), "an hour untouched, no upload here owns it");
    assert_eq!(first.chunk(&id, 0, B64.encode(b"x")).unwrap(), 0);
    assert!(
        first.finish(&id).is_ok(),
        "the live upload's part file stayed"
    );
    drop(f);
    std::fs::File::create(&left)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - Duration::from_secs(3600))
        .unwrap();
    let _second = StagingStore::open(StagingOptions::new(&staging)).unwrap();
    assert!(!left.exists(), "swept at open");
}

#[test]
fn a_planted_link_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), dir.path().join("staging")).unwrap();
    assert!(StagingStore::open(StagingOptions::new(dir.path().join("staging"))).is_err());
}

#[test]
fn decoding_trims_whitespace_and_refuses_what_is_not_base64() {
    assert_eq!(decode_text(" aGVsbG8K\n").unwrap(), b"hello\n");
    assert_eq!(decode_text("").unwrap(), b"");
    for bad in [
        "aGVsbG8",
        "aGV sbG8K",
        "aGVsbG8K!",
        "aGVs\nbG8K",
        "////=",
        "aGVsbG8K====",
    ] {
        let err = decode_text(bad).unwrap_err();
        assert_eq!(err.code, ErrorCode::BadArgument, "{bad:?}");
        assert!(err.message.contains("not valid base64"), "{bad:?}");
    }
}

proptest! {
    /// The in-place SIMD decoder agrees with the reference decoder on every input, valid or not.
    #[test]
    fn decoding_agrees_with_the_reference(
        bytes in proptest::collection::vec(any::<u8>(), 0..300),
        noise in proptest::option::of((any::<prop::sample::Index>(), any::<u8>())),
    ) {
        let mut text = B64.encode(&bytes);
        if let Some((at, byte)) = noise && !text.is_empty() {
            let at = at.index(text.len());
            text.replace_range(at..at + 1, &char::from(byte & 0x7f).to_string());
        }
        let reference = B64.decode(text.trim_matches(|c: char| c.is_ascii_whitespace())).ok();
        prop_assert_eq!(decode_text(&text).ok(), reference);
    }
}
