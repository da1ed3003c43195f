//! Zip and tar actions, including hostile archives.

mod common;

use std::io::Write;

use base64::Engine as _;
use common::Harness;
use serde_json::json;

fn aes_zip(h: &Harness, rel: &str, password: &str) {
    let f = std::fs::File::create(h.path(rel)).unwrap();
    let mut zw = zip::ZipWriter::new(f);
    let opts = zip::write::SimpleFileOptions::default()
        .with_aes_encryption(zip::AesMode::Aes256, password);
    zw.start_file("secret.txt", opts).unwrap();
    zw.write_all(b"hidden words").unwrap();
    zw.start_file("plain.txt", zip::write::SimpleFileOptions::default())
        .unwrap();
    zw.write_all(b"open").unwrap();
    zw.finish().unwrap();
}

#[tokio::test]
async fn zip_dir_then_read_list_info_and_unzip() {
    let h = Harness::new();
    h.write("src/a.txt", "alpha");
    h.write("src/sub/b.txt", "beta");
    // The zip's missing directory is made, as shutil.make_archive makes it.
    let out = h
        .call(
            "FA_zip_dir",
            json!({"dir_we_want_to_zip": "src", "zip_name": "out/arch"}),
        )
        .await
        .unwrap();
    assert_eq!(out["path"], h.p("out/arch.zip"));
    assert_eq!(out["members"], 3);

    let names = h
        .call("FA_zip_file_info", json!({"zip_file_path": "out/arch.zip"}))
        .await
        .unwrap();
    let names: Vec<&str> = names["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["a.txt", "sub/", "sub/b.txt"]);

    let info = h
        .call("FA_zip_info", json!({"zip_file_path": "out/arch.zip"}))
        .await
        .unwrap();
    let a = &info["members"][0];
    assert_eq!(a["filename"], "a.txt");
    assert_eq!(a["file_size"], 5);
    assert_eq!(a["encrypted"], false);
    assert_eq!(info["members"][1]["is_dir"], true);

    let read = h
        .call(
            "FA_read_zip_file",
            json!({"zip_file_path": "out/arch.zip", "file_name": "sub/b.txt"}),
        )
        .await
        .unwrap();
    assert_eq!(read["text"], "beta");
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(read["content_b64"].as_str().unwrap())
            .unwrap(),
        b"beta"
    );

    let one = h
        .call("FA_unzip_file", json!({"zip_file_path": "out/arch.zip", "extract_member": "sub/b.txt", "extract_path": "x"}))
        .await
        .unwrap();
    assert_eq!(one["count"], 1);
    assert_eq!(
        std::fs::read_to_string(h.path("x/sub/b.txt")).unwrap(),
        "beta"
    );

    let all = h
        .call(
            "FA_unzip_all",
            json!({"zip_file_path": "out/arch.zip", "extract_path": "y"}),
        )
        .await
        .unwrap();
    assert_eq!(all["count"], 2);
    assert_eq!(std::fs::read_to_string(h.path("y/a.txt")).unwrap(), "alpha");
    let some = h
        .call("FA_unzip_all", json!({"zip_file_path": "out/arch.zip", "extract_member": ["a.txt"], "extract_path": "z"}))
        .await
        .unwrap();
    assert_eq!(some["count"], 1);
    assert!(!h.path("z/sub/b.txt").exists());
    // Without extract_path the archive's own directory receives the files.
    h.call(
        "FA_unzip_file",
        json!({"zip_file_path": "out/arch.zip", "extract_member": "a.txt"}),
    )
    .await
    .unwrap();
    assert!(h.path("out/a.txt").exists());
}

#[tokio::test]
async fn zip_file_one_or_many() {
    let h = Harness::new();
    h.write("d/one.txt", "1");
    h.write("d/two.txt", "2");
    let out = h
        .call(
            "FA_zip_file",
            json!({"zip_file_path": "single.zip", "file": "d/one.txt"}),
        )
        .await
        .unwrap();
    assert_eq!(out["members"], 1);
    let out = h
        .call(
            "FA_zip_file",
            json!({"zip_file_path": "multi.zip", "file": ["d/one.txt", "d/two.txt"]}),
        )
        .await
        .unwrap();
    assert_eq!(out["members"], 2);
    let names = h
        .call("FA_zip_file_info", json!({"zip_file_path": "multi.zip"}))
        .await
        .unwrap();
    assert_eq!(names["names"], json!(["one.txt", "two.txt"]));
    assert_eq!(
        h.call("FA_zip_file", json!({"zip_file_path": "m.zip", "file": []}))
            .await
            .unwrap_err(),
        "bad_argument"
    );
    assert_eq!(
        h.call(
            "FA_zip_file",
            json!({"zip_file_path": "m.zip", "file": "nope"})
        )
        .await
        .unwrap_err(),
        "no_such_file"
    );
    assert_eq!(
        h.call("FA_zip_file", json!({"zip_file_path": "m.zip", "file": 5}))
            .await
            .unwrap_err(),
        "bad_argument"
    );
}

#[tokio::test]
async fn encrypted_members_need_the_password() {
    let h = Harness::new();
    aes_zip(&h, "enc.zip", "s3cret");
    let args = json!({"zip_file_path": "enc.zip", "file_name": "secret.txt"});
    assert_eq!(
        h.call("FA_read_zip_file", args).await.unwrap_err(),
        "bad_argument"
    );
    let wrong = json!({"zip_file_path": "enc.zip", "file_name": "secret.txt", "password": "nope"});
    assert_eq!(
        h.call("FA_read_zip_file", wrong).await.unwrap_err(),
        "bad_argument"
    );
    let right =
        json!({"zip_file_path": "enc.zip", "file_name": "secret.txt", "password": "s3cret"});
    assert_eq!(
        h.call("FA_read_zip_file", right).await.unwrap()["text"],
        "hidden words"
    );
    let check = h
        .call(
            "FA_set_zip_password",
            json!({"zip_file_path": "enc.zip", "password": "s3cret"}),
        )
        .await
        .unwrap();
    assert_eq!(check, json!({"encrypted_members": 1, "password_ok": true}));
    let check = h
        .call(
            "FA_set_zip_password",
            json!({"zip_file_path": "enc.zip", "password": "bad"}),
        )
        .await
        .unwrap();
    assert_eq!(check["password_ok"], false);
    let all = json!({"zip_file_path": "enc.zip", "extract_path": "o", "password": "s3cret"});
    assert_eq!(h.call("FA_unzip_all", all).await.unwrap()["count"], 2);
    assert_eq!(
        std::fs::read_to_string(h.path("o/secret.txt")).unwrap(),
        "hidden words"
    );
}

#[tokio::test]
async fn zip_errors() {
    let h = Harness::new();
    h.write("not.zip", "plain text");
    h.write("src/a", "a");
    h.call(
        "FA_zip_dir",
        json!({"dir_we_want_to_zip": "src", "zip_name": "ok"}),
    )
    .await
    .unwrap();
    assert_eq!(
        h.call("FA_zip_info", json!({"zip_file_path": "not.zip"}))
            .await
            .unwrap_err(),
        "unsupported_format"
    );
    assert_eq!(
        h.call("FA_zip_file_info", json!({"zip_file_path": "missing.zip"}))
            .await
            .unwrap_err(),
        "no_such_file"
    );
    let args = json!({"zip_file_path": "ok.zip", "file_name": "absent"});
    assert_eq!(
        h.call("FA_read_zip_file", args).await.unwrap_err(),
        "no_such_file"
    );
    let args = json!({"zip_file_path": "ok.zip", "extract_member": "absent"});
    assert_eq!(
        h.call("FA_unzip_file", args).await.unwrap_err(),
        "no_such_file"
    );
    let args = json!({"zip_file_path": "ok.zip", "extract_member": "a", "extract_path": "/tmp"});
    assert_eq!(
        h.call("FA_unzip_file", args).await.unwrap_err(),
        "path_outside_roots"
    );
    let args = json!({"dir_we_want_to_zip": "/etc", "zip_name": "x"});
    assert_eq!(
        h.call("FA_zip_dir", args).await.unwrap_err(),
        "path_outside_roots"
    );
}

#[tokio::test]
async fn a_zip_slip_member_is_refused() {
    let h = Harness::new();
    let f = std::fs::File::create(h.path("slip.zip")).unwrap();
    let mut zw = zip::ZipWriter::new(f);
    zw.start_file("../../evil.txt", zip::write::SimpleFileOptions::default())
        .unwrap();
    zw.write_all(b"x").unwrap();
    zw.finish().unwrap();
    let err = h
        .call(
            "FA_unzip_all",
            json!({"zip_file_path": "slip.zip", "extract_path": "out"}),
        )
        .await
        .unwrap_err();
    assert_eq!(err, "bad_argument");
    assert!(!h.root().parent().unwrap().join("evil.txt").exists());
}

#[tokio::test]
async fn tar_round_trip_in_every_compression() {
    let h = Harness::new();
    h.write("tree/a.txt", "alpha");
    h.write("tree/deep/b.txt", "beta");
    std::os::unix::fs::symlink("a.txt", h.path("tree/link")).unwrap();
    for (compression, name) in [
        (json!("gz"), "t.tgz"),
        (json!("bz2"), "t.tbz"),
        (json!("xz"), "t.txz"),
        (json!(null), "t.tar"),
        (json!("none"), "t2.tar"),
    ] {
        let out = h
            .call("FA_create_tar", json!({"source": "tree", "target": format!("arch/{name}"), "compression": compression}))
            .await
            .unwrap();
        assert_eq!(out["members"], 5, "{name}");
        let dest = format!("out-{name}");
        let names = h
            .call(
                "FA_extract_tar",
                json!({"source": format!("arch/{name}"), "target_dir": dest}),
            )
            .await
            .unwrap();
        assert!(names["count"].as_u64().unwrap() >= 4, "{name}: {names}");
        assert_eq!(
            std::fs::read_to_string(h.path(&format!("{dest}/tree/deep/b.txt"))).unwrap(),
            "beta"
        );
        assert_eq!(
            std::fs::read_link(h.path(&format!("{dest}/tree/link")))
                .unwrap()
                .to_str()
                .unwrap(),
            "a.txt"
        );
    }
    // The default is gzip.
    h.call(
        "FA_create_tar",
        json!({"source": "tree/a.txt", "target": "one.tar.gz"}),
    )
    .await
    .unwrap();
    assert_eq!(
        &std::fs::read(h.path("one.tar.gz")).unwrap()[..2],
        &[0x1f, 0x8b]
    );
}

#[tokio::test]
async fn tar_errors() {
    let h = Harness::new();
    h.write("f.txt", "x");
    h.write(
        "junk.tar",
        "this is not a tar archive at all, just text that goes on for a while",
    );
    let args = json!({"source": "f.txt", "target": "x.tar", "compression": "lz4"});
    assert_eq!(
        h.call("FA_create_tar", args).await.unwrap_err(),
        "bad_argument"
    );
    assert_eq!(
        h.call(
            "FA_create_tar",
            json!({"source": "nope", "target": "x.tar"})
        )
        .await
        .unwrap_err(),
        "no_such_file"
    );
    assert_eq!(
        h.call(
            "FA_extract_tar",
            json!({"source": "nope.tar", "target_dir": "o"})
        )
        .await
        .unwrap_err(),
        "no_such_file"
    );
    assert_eq!(
        h.call(
            "FA_extract_tar",
            json!({"source": "junk.tar", "target_dir": "o"})
        )
        .await
        .unwrap_err(),
        "unsupported_format"
    );
    let args = json!({"source": "f.txt", "target": "/tmp/escape.tar"});
    assert_eq!(
        h.call("FA_create_tar", args).await.unwrap_err(),
        "path_outside_roots"
    );
}

fn raw_tar_member(path: &str, kind: tar::EntryType, link: Option<&str>, data: &[u8]) -> Vec<u8> {
    let mut header = tar::Header::new_gnu();
    {
        let name = &mut header.as_old_mut().name;
        name[..path.len()].copy_from_slice(path.as_bytes());
    }
    header.set_entry_type(kind);
    header.set_size(data.len() as u64);
    header.set_mode(0o644);
    if let Some(l) = link {
        let field = &mut header.as_old_mut().linkname;
        field[..l.len()].copy_from_slice(l.as_bytes());
    }
    header.set_cksum();
    let mut out = header.as_bytes().to_vec();
    out.extend_from_slice(data);
    out.resize(out.len().div_ceil(512) * 512, 0);
    out
}

#[tokio::test]
async fn hostile_tars_write_nothing() {
    let h = Harness::new();
    let cases = [
        (
            "dotdot.tar",
            raw_tar_member("../escape.txt", tar::EntryType::Regular, None, b"x"),
        ),
        (
            "absolute.tar",
            raw_tar_member("/tmp/maljan-abs.txt", tar::EntryType::Regular, None, b"x"),
        ),
        (
            "symlink.tar",
            raw_tar_member("link", tar::EntryType::Symlink, Some("/etc"), b""),
        ),
        (
            "symlink-up.tar",
            raw_tar_member("a/link", tar::EntryType::Symlink, Some("../../.."), b""),
        ),
        (
            "hardlink.tar",
            raw_tar_member("hl", tar::EntryType::Link, Some("/etc/passwd"), b""),
        ),
    ];
    for (name, mut bytes) in cases {
        bytes.extend_from_slice(&[0u8; 1024]);
        std::fs::write(h.path(name), &bytes).unwrap();
        let err = h
            .call(
                "FA_extract_tar",
                json!({"source": name, "target_dir": format!("out-{name}")}),
            )
            .await
            .unwrap_err();
        assert_eq!(err, "bad_argument", "{name}");
        let listing = std::fs::read_dir(h.path(&format!("out-{name}")))
            .map(|d| d.count())
            .unwrap_or(0);
        assert_eq!(listing, 0, "{name} wrote something");
    }
    assert!(!std::path::Path::new("/tmp/maljan-abs.txt").exists());
    // A symlink that stays inside is fine.
    let mut ok = raw_tar_member("d/link", tar::EntryType::Symlink, Some("../f"), b"");
    ok.extend(raw_tar_member("f", tar::EntryType::Regular, None, b"data"));
    ok.extend_from_slice(&[0u8; 1024]);
    std::fs::write(h.path("ok.tar"), &ok).unwrap();
    h.call(
        "FA_extract_tar",
        json!({"source": "ok.tar", "target_dir": "good"}),
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(h.path("good/d/link")).unwrap(),
        "data"
    );
}
