//! The facts of what the code does once seen: a shellcode loader's act, and a packed program's
//! unpacked image judged as its own child.

use super::*;

#[test]
fn a_shellcode_loader_is_one_strong_fact_and_rwx_alone_is_described() {
    let loader = |discriminating| {
        report(thick(vec![caps(
            "ev_0010",
            vec![cap(
                "T1620",
                "run code in memory it made writable and executable",
                discriminating,
            )],
        )]))
    };
    let v = verdict(&loader(true), &ids());
    assert_eq!(v.verdict, VerdictWord::Suspicious, "{}", v.summary);
    let f = fact(&v, "shellcode_loader");
    assert!(f.strong);
    assert_eq!(f.evidence, ["ev_0010"]);
    assert_eq!(v.techniques[0].id, "T1620");
    // RWX memory without code started in it (a JIT's allocator): described, never scored.
    let v = verdict(&loader(false), &ids());
    assert_eq!(v.verdict, VerdictWord::Unknown, "{}", v.summary);
    assert!(v.facts.iter().all(|f| f.id != "shellcode_loader"));
    // A loader that also injects: two independent strong facts.
    let r = report(thick(vec![caps(
        "ev_0010",
        vec![
            cap("T1620", "shellcode loader", true),
            cap("T1055", "inject", true),
        ],
    )]));
    assert_eq!(verdict(&r, &ids()).verdict, VerdictWord::Malicious);
}

#[test]
fn a_packed_program_is_judged_through_its_unpacked_image() {
    let packed_steps = thick(vec![
        step(
            "detect_packer",
            "ev_0010",
            json!({"findings": [{"category": "packer", "name": "UPX"}]}),
        ),
        caps("ev_0011", vec![cap("T1129", "LoadLibraryA", false)]),
    ]);
    let unpacked = child(
        "1",
        "upx-unpacked.exe",
        "pe",
        "unpacked",
        vec![
            caps(
                "ev_0020",
                vec![cap("T1056.001", "capture keystrokes", true)],
            ),
            step("iocs_from_file", "ev_0021", json!({"counts": {}})),
            yara("ev_0022", json!([])),
        ],
    );
    let r = report_of("pe", packed_steps.clone(), vec![unpacked], vec![]);
    let v = verdict(&r, &ids());
    assert_eq!(v.verdict, VerdictWord::Suspicious, "{}", v.summary);
    let up = fact(&v, "child_suspicious");
    assert_eq!(up.child.as_deref(), Some("upx-unpacked.exe"));
    assert!(
        up.observations.iter().any(|o| o.contains("keystrokes")),
        "{:?}",
        up.observations
    );
    assert!(up.evidence.contains(&"ev_0020".to_string()));
    // The image is the sample itself, not an executable it carries.
    assert!(v.facts.iter().all(|f| f.id != "carries_executable"));
    // A benign program packed: its unpacked image accuses nothing, and packing alone never does.
    let plain = child(
        "1",
        "upx-unpacked.exe",
        "pe",
        "unpacked",
        vec![
            caps("ev_0020", vec![cap("T1129", "LoadLibraryA", false)]),
            step("iocs_from_file", "ev_0021", json!({"counts": {}})),
            yara("ev_0022", json!([])),
        ],
    );
    let v = verdict(&report_of("pe", packed_steps, vec![plain], vec![]), &ids());
    assert!(
        matches!(v.verdict, VerdictWord::Unknown | VerdictWord::Benign),
        "{}",
        v.summary
    );
}

fn signed(ev: &str, signature: Value) -> Value {
    step(
        "detect_packer",
        ev,
        json!({"findings": [{"category": "compiler", "name": "MSVC"}], "signature": signature}),
    )
}

#[test]
fn a_valid_signature_is_a_benign_basis_and_a_changed_file_is_not() {
    let valid = json!({"valid": true, "signer": "CN=Microsoft Corporation", "digest_algorithm": "sha256",
                       "digest_matches": true, "message_digest_matches": true,
                       "signer_signature_verified": true,
                       "chain": [{"verified": true}, {"verified": null}], "problems": []});
    let r = report(thick(vec![
        signed("ev_0010", valid.clone()),
        pe_info("ev_0011", 5, json!([])),
    ]));
    let v = verdict(&r, &ids());
    assert_eq!(v.verdict, VerdictWord::Benign, "{}", v.summary);
    let f = fact(&v, "valid_signature");
    assert_eq!(f.leaning, Leaning::Benign);
    assert!(
        f.observations[0].contains("Microsoft"),
        "{:?}",
        f.observations
    );
    // One byte changed after signing: the digest differs; no benign basis, a named mismatch.
    let mut changed = valid.clone();
    changed["valid"] = json!(false);
    changed["digest_matches"] = json!(false);
    changed["problems"] =
        json!(["the signature does not match the file: its Authenticode digest differs"]);
    let r = report(thick(vec![
        signed("ev_0010", changed),
        pe_info("ev_0011", 5, json!([])),
    ]));
    let v = verdict(&r, &ids());
    assert!(v.facts.iter().all(|f| f.id != "valid_signature"));
    let m = fact(&v, "signature_mismatch");
    assert!(
        m.observations[0].contains("does not match"),
        "{:?}",
        m.observations
    );
    assert_ne!(v.verdict, VerdictWord::Benign);
    assert_ne!(v.verdict, VerdictWord::Malicious);
    // A signature this check could not verify either way is neither fact.
    let mut unknown = valid;
    unknown["valid"] = json!(false);
    unknown["signer_signature_verified"] = json!(null);
    let r = report(thick(vec![signed("ev_0010", unknown)]));
    let v = verdict(&r, &ids());
    assert!(
        v.facts
            .iter()
            .all(|f| f.id != "valid_signature" && f.id != "signature_mismatch")
    );
}
