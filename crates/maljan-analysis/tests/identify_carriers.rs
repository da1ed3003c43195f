//! identify_file names what the third-party files showed it missing: an HTML page and an
//! SVG image carrying a program in base64 (a `data:` URI, a script's string — HTML smuggling)
//! are still a page and an image, named as carrying an executable; a Symbian SIS package, in
//! both its formats, is recognised. A page whose base64 is not a program carries nothing.

mod corpus;

use base64::Engine;
use maljan_analysis::identify;

fn program_b64() -> String {
    base64::engine::general_purpose::STANDARD.encode(corpus::packed::upx_pe())
}

#[test]
fn html_with_a_data_uri_program_is_a_page_carrying_an_executable() {
    let page = format!(
        "<!DOCTYPE html>\n<html><body><a download=\"invoice.exe\" \
         href=\"data:application/x-msdownload;base64,{}\">Download</a></body></html>\n",
        program_b64()
    );
    let k = identify(page.as_bytes());
    assert_eq!(k.kind, "html");
    assert_eq!(k.details["carries_executable"], "pe");
    assert!(
        k.description.starts_with("HTML document")
            && k.description.contains("carrying an executable"),
        "{}",
        k.description
    );
}

#[test]
fn html_smuggling_a_program_in_a_script_string_is_named() {
    // The blob wrapped at 76 columns, as base64 encoders write it, inside a script's template.
    let wrapped: String = program_b64()
        .as_bytes()
        .chunks(76)
        .map(|c| format!("{}\n", std::str::from_utf8(c).unwrap()))
        .collect();
    let page = format!(
        "<html><head><title>Invoice</title></head><body><script>\nvar b = `{wrapped}`;\n\
         var a = document.createElement('a');\na.href = URL.createObjectURL(new Blob([atob(b)]));\n\
         a.download = 'invoice.exe'; a.click();\n</script></body></html>\n"
    );
    let k = identify(page.as_bytes());
    assert_eq!(k.kind, "html");
    assert_eq!(k.details["carries_executable"], "pe");
}

#[test]
fn svg_with_an_embedded_program_is_an_image_carrying_an_executable() {
    let svg = format!(
        "<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" \
         xmlns:xlink=\"http://www.w3.org/1999/xlink\"><a xlink:href=\"data:application/octet-stream;base64,{}\">\
         <text x=\"10\" y=\"20\">Open</text></a></svg>\n",
        program_b64()
    );
    let k = identify(svg.as_bytes());
    assert_eq!(k.kind, "xml");
    assert_eq!(k.details["format"], "svg");
    assert_eq!(k.details["carries_executable"], "pe");
    assert!(
        k.description
            .starts_with("SVG Scalable Vector Graphics image"),
        "{}",
        k.description
    );
}

#[test]
fn a_page_with_an_ordinary_image_carries_nothing() {
    let png = base64::engine::general_purpose::STANDARD.encode(b"\x89PNG\r\n\x1a\n".repeat(40));
    let page = format!("<html><body><img src=\"data:image/png;base64,{png}\"></body></html>\n");
    let k = identify(page.as_bytes());
    assert_eq!(k.kind, "html");
    assert!(!k.details.contains_key("carries_executable"));
    assert!(!k.description.contains("executable"), "{}", k.description);
}

#[test]
fn symbian_sis_packages_are_recognised() {
    let sis9 = [
        &0x1020_1A7Au32.to_le_bytes()[..],
        &0u32.to_le_bytes(),
        &0x2000_ABCDu32.to_le_bytes(),
        &[0u8; 200],
    ]
    .concat();
    let k = identify(&sis9);
    assert_eq!(k.kind, "sis");
    assert_eq!(k.description, "Symbian installation file (Symbian OS 9.x)");
    let epoc = [
        &0x2000_ABCDu32.to_le_bytes()[..],
        &0x1000_006Du32.to_le_bytes(),
        &0x1000_0419u32.to_le_bytes(),
        &[0u8; 200],
    ]
    .concat();
    let k = identify(&epoc);
    assert_eq!(k.kind, "sis");
    assert_eq!(
        k.description,
        "Symbian installation file (EPOC release 3/4/5)"
    );
}

/// The same answers through the served tool (`maljan serve analysis`'s registry).
#[tokio::test]
async fn the_served_identify_file_names_the_carrier_and_the_package() {
    use maljan_analysis::{AnalysisConfig, registry};
    use maljan_server::{Roots, ToolServer};
    use tokio_util::sync::CancellationToken;

    let dir = tempfile::tempdir().unwrap();
    let samples = dir.path().join("samples");
    std::fs::create_dir(&samples).unwrap();
    let page = format!(
        "<!DOCTYPE html>\n<html><body><a href=\"data:application/x-msdownload;base64,{}\">x</a></body></html>\n",
        program_b64()
    );
    std::fs::write(samples.join("invoice.html"), page).unwrap();
    let sis = [&0x1020_1A7Au32.to_le_bytes()[..], &[0u8; 60]].concat();
    std::fs::write(samples.join("app.sis"), sis).unwrap();
    let config = AnalysisConfig {
        roots: Roots::new([&samples]).unwrap(),
        work_dir: maljan_analysis::WorkDir::private_under(&dir.path().join("work")).unwrap(),
        rules_dir: None,
        builtin_rules: false,
    };
    let server = ToolServer::new("analysis", "test", registry(config));
    for (name, kind, words) in [
        ("invoice.html", "html", "carrying an executable"),
        ("app.sis", "sis", "Symbian installation file"),
    ] {
        let mut args = serde_json::Map::new();
        let path = samples.join(name).display().to_string();
        args.insert("path".into(), path.into());
        let out = server
            .call("identify_file", args, CancellationToken::new(), None)
            .await
            .expect("identify_file is served");
        assert!(!out.is_error, "{}", out.value);
        assert_eq!(out.value["kind"], kind, "{}", out.value);
        let desc = out.value["description"].as_str().unwrap();
        assert!(desc.contains(words), "{desc}");
    }
}
