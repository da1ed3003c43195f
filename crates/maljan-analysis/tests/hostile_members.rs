//! Hostile input to member extraction: the parsers written here (cpio, uuencode, RTF `\objdata`,
//! OLE1 and Ole10Native headers, TNEF, BinHex, ISO 9660, shortcuts) on random bytes and on valid containers with bytes flipped or cut
//! must not panic (they run outside any containment) and never point outside their input; the
//! whole extraction on anything stays within its limits and contains library panics.

mod corpus;

use maljan_analysis::{
    common::contained_panics,
    document_lnk::shortcut,
    members::{Limits, extract},
    members_iso::iso_files,
    members_mail::{cpio_entries, ole1_native, ole10_native, rtf_objdata, uudecode_all},
    members_tnef::{binhex_decode, tnef_attachments},
};
use proptest::prelude::*;

fn newc(name: &str, data: &[u8]) -> Vec<u8> {
    let mut h = format!(
        "070701{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}",
        1,
        0o100644,
        0,
        0,
        1,
        0,
        data.len(),
        0,
        0,
        0,
        0,
        name.len() + 1,
        0
    )
    .into_bytes();
    h.extend_from_slice(name.as_bytes());
    h.push(0);
    while h.len() % 4 != 0 {
        h.push(0);
    }
    h.extend_from_slice(data);
    while h.len() % 4 != 0 {
        h.push(0);
    }
    h
}

/// A winmail.dat with one attachment (rendering, title, data), for mutation.
fn tnef_seed() -> Vec<u8> {
    let mut t = 0x223E_9F78u32.to_le_bytes().to_vec();
    t.extend_from_slice(&[1, 0]);
    for (id, data) in [
        (0x0006_9002u32, &[1u8, 0, 0, 0][..]),
        (0x0001_8010, b"A.EXE\0"),
        (0x0006_800F, b"MZ\x90\0payload"),
    ] {
        t.push(2);
        t.extend_from_slice(&id.to_le_bytes());
        t.extend_from_slice(&(data.len() as u32).to_le_bytes());
        t.extend_from_slice(data);
        t.extend_from_slice(&[0, 0]);
    }
    t
}

/// An ISO 9660 image: a primary volume whose root (sector 18) holds itself and one file.
fn iso_seed() -> Vec<u8> {
    let rec = |lba: u32, len: u32, flags: u8, name: &[u8]| {
        let mut r = vec![0u8; 33];
        r[2..6].copy_from_slice(&lba.to_le_bytes());
        r[10..14].copy_from_slice(&len.to_le_bytes());
        r[25] = flags;
        r[32] = name.len() as u8;
        r.extend_from_slice(name);
        r[0] = r.len() as u8;
        r
    };
    let mut iso = vec![0u8; 19 * 2048];
    let pvd = 16 * 2048;
    iso[pvd] = 1;
    iso[pvd + 1..pvd + 6].copy_from_slice(b"CD001");
    let root = rec(18, 2048, 2, &[0]);
    iso[pvd + 156..pvd + 156 + root.len()].copy_from_slice(&root);
    iso[17 * 2048] = 255;
    iso[17 * 2048 + 1..17 * 2048 + 6].copy_from_slice(b"CD001");
    let dir = [
        rec(18, 2048, 2, &[0]),
        rec(18, 2048, 2, b"LOOP"),
        rec(0, 300, 0, b"A.EXE;1"),
    ]
    .concat();
    iso[18 * 2048..18 * 2048 + dir.len()].copy_from_slice(&dir);
    iso
}

/// A shortcut with an ID list, LinkInfo and Unicode arguments.
fn lnk_seed() -> Vec<u8> {
    let mut l = vec![0u8; 0x4C];
    l[0] = 0x4C;
    l[4..8].copy_from_slice(&[0x01, 0x14, 0x02, 0x00]);
    l[0x14] = 0x01 | 0x02 | 0x20 | 0x80;
    l.extend_from_slice(&[
        16, 0, 14, 0, 0x2F, b'C', b':', b'\\', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ]);
    let mut info = vec![0u8; 0x1C];
    info[0] = 0x1C + 8;
    info[4] = 0x1C;
    info[8] = 1;
    info[0x10] = 0x1C;
    info[0x18] = 0x1C + 7;
    info.extend_from_slice(b"C:\\a.e\0\0");
    l.extend(info);
    l.extend_from_slice(&[2, 0, b'-', 0, b'x', 0]);
    l
}

fn seeds() -> Vec<Vec<u8>> {
    vec![
        lnk_seed(),
        iso_seed(),
        tnef_seed(),
        b"(This file must be converted with BinHex 4.0)\n:#'CTE'8ZG(Kd!&4&@&4dG(Kd!!!!!!'!!!!!!!:".to_vec(),
        [newc("a.exe", &corpus::pe()), newc("b.txt", b"hello")].concat(),
        b"begin 644 cat.txt\n#0V%T\n`\nend\n".to_vec(),
        b"{\\rtf1{\\object{\\*\\objdata 0105000002000000080000005061636b616765000000000000000000040000004d5a9000}}}".to_vec(),
        corpus::zip_archive(),
        corpus::gzip(&corpus::tar_archive(), "a.tar"),
        corpus::ole_with_vba("Macros/", true),
        [corpus::pe(), corpus::zip_archive()].concat(),
        b"From: a@b\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=X\r\n\r\n--X\r\nContent-Disposition: attachment; filename=a.bin\r\nContent-Transfer-Encoding: base64\r\n\r\nTVqQAA==\r\n--X--\r\n".to_vec(),
    ]
}

fn mutated() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::sample::select(seeds()),
        prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..16),
        any::<prop::sample::Index>(),
        any::<bool>(),
    )
        .prop_map(|(mut b, flips, cut, do_cut)| {
            for (i, v) in flips {
                let at = i.index(b.len());
                b[at] = v;
            }
            if do_cut {
                b.truncate(cut.index(b.len() + 1));
            }
            b
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn the_hand_written_decoders_never_panic_nor_point_outside_their_input(
        b in prop_oneof![mutated(), prop::collection::vec(any::<u8>(), 0..4096)]
    ) {
        for e in cpio_entries(&b, 1000) {
            prop_assert!(e.data.start <= e.data.end && e.data.end <= b.len());
        }
        for (_, data) in uudecode_all(&b) {
            prop_assert!(data.len() <= b.len());
        }
        for d in rtf_objdata(&b) {
            prop_assert!(d.len() <= b.len() / 2 + 1);
            if let Some((_, native)) = ole1_native(&d) {
                prop_assert!(native.len() <= d.len());
            }
        }
        if let Some((_, data)) = ole10_native(&b) {
            prop_assert!(data.len() <= b.len());
        }
        if let Some(s) = shortcut(&b) {
            prop_assert!(s.arguments.map_or(0, |a| a.len()) <= b.len() * 2);
        }
        for f in iso_files(&b, 1000) {
            prop_assert!(f.data.start <= f.data.end && f.data.end <= b.len());
        }
        let attached: usize = tnef_attachments(&b).iter().map(|a| a.data.len()).sum();
        prop_assert!(attached <= b.len());
        if let Some((_, data, rsrc)) = binhex_decode(&b) {
            prop_assert!(data.len() + rsrc.len() <= b.len() * 128);
        }
    }

    #[test]
    fn extraction_stays_within_its_limits_on_anything(b in mutated()) {
        let before = contained_panics();
        let limits = Limits { max_members: 8, max_total_bytes: 1 << 20, max_ratio: 50 };
        let (x, data) = extract(&b, limits, &|| false);
        prop_assert!(x.members.len() <= 8);
        prop_assert!(x.total_bytes <= 1 << 20);
        prop_assert_eq!(data.len(), x.members.len());
        prop_assert_eq!(x.total_bytes, data.iter().map(|d| d.len() as u64).sum::<u64>());
        // A library panic is contained and said, never lost.
        if contained_panics() > before {
            prop_assert!(!x.without.is_empty());
        }
    }
}
