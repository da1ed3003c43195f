//! `extract_members` unwraps the programs documents carry the way phishing delivers them: an
//! RTF `\objdata` OLE1 `Package` (the packaged file under its own name), an HTML page's
//! `data:…;base64` download link, and an HTML-smuggling script's base64 string; short or broken
//! base64 and page images are left alone, and the collector's limits still hold.

mod corpus;

use base64::Engine as _;
use maljan_analysis::{
    hashes::sha256_hex,
    members::{Extraction, Limits, extract},
};

fn members(b: &[u8]) -> Extraction {
    extract(b, Limits::default(), &|| false).0
}

fn names(x: &Extraction) -> Vec<&str> {
    x.members.iter().map(|m| m.name.as_str()).collect()
}

fn b64(b: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(b)
}

/// An RTF document whose `\objdata` is an OLE1 embedded `Package` of `file` holding `data`,
/// laid out as Windows' packager writes it (the hex wrapped at 128 columns).
fn rtf_package(file: &str, data: &[u8]) -> Vec<u8> {
    let cstr = |s: &str| [s.as_bytes(), b"\0"].concat();
    let tmp = cstr(&format!("C:\\Users\\u\\AppData\\Local\\Temp\\{file}"));
    let mut native = 2u16.to_le_bytes().to_vec();
    native.extend(cstr(file));
    native.extend(cstr(&format!("C:\\Users\\u\\Desktop\\{file}")));
    native.extend(0x0003_0000u32.to_le_bytes());
    native.extend((tmp.len() as u32).to_le_bytes());
    native.extend(&tmp);
    native.extend((data.len() as u32).to_le_bytes());
    native.extend(data);
    let mut ole1 = 0x0501u32.to_le_bytes().to_vec();
    ole1.extend(2u32.to_le_bytes());
    ole1.extend(8u32.to_le_bytes());
    ole1.extend(b"Package\0");
    ole1.extend(0u32.to_le_bytes()); // topic
    ole1.extend(0u32.to_le_bytes()); // item
    ole1.extend((native.len() as u32).to_le_bytes());
    ole1.extend(&native);
    let hex = hex::encode(&ole1);
    let wrapped: Vec<&str> = hex
        .as_bytes()
        .chunks(128)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    format!(
        "{{\\rtf1\\ansi\\deff0\n\\pard Open the attached file.\\par\n\
         {{\\object\\objemb{{\\*\\objclass Package}}{{\\*\\objdata\n{}\n}}}}\n}}",
        wrapped.join("\n")
    )
    .into_bytes()
}

#[test]
fn an_rtf_package_gives_the_program_under_its_own_name() {
    let pe = corpus::pe();
    let x = members(&rtf_package("invoice.exe", &pe));
    assert_eq!(x.format, "rtf");
    assert_eq!(names(&x), ["invoice.exe"]);
    assert_eq!(x.members[0].kind, "pe");
    assert_eq!(x.members[0].source, "rtf");
    assert_eq!(x.members[0].sha256, sha256_hex(&pe));

    // A packaged path is reduced to its file name: the member never names a directory.
    let x = members(&rtf_package("..\\..\\Startup\\run.exe", &pe));
    assert_eq!(names(&x), ["run.exe"]);
}

#[test]
fn an_html_data_uri_download_is_extracted_under_its_download_name() {
    let pe = corpus::pe();
    let icon = b64(&[0x89, b'P', b'N', b'G'].repeat(200));
    let page = format!(
        "<!DOCTYPE html>\n<html><body><img src=\"data:image/png;base64,{icon}\">\n\
         <a id=\"dl\" href=\"data:application/octet-stream;base64,{}\" download=\"statement.exe\">get it</a>\n\
         <a href=\"data:application/octet-stream;base64,{}\">second</a>\n</body></html>",
        b64(&pe),
        b64(&[b"MZ".as_slice(), &[7u8; 600]].concat()),
    );
    let x = members(page.as_bytes());
    assert_eq!(x.format, "html");
    assert_eq!(names(&x), ["statement.exe", "data-uri-2.bin"]);
    assert_eq!(x.members[0].kind, "pe");
    assert_eq!(x.members[0].sha256, sha256_hex(&pe));
    assert_eq!(x.members[0].source, "html");
}

#[test]
fn an_html_smuggling_script_string_is_decoded() {
    let pe = corpus::pe();
    // The base64 wrapped in a template literal, the way smuggling kits break long lines, after
    // an apostrophe in the page's text.
    let blob: Vec<String> = b64(&pe)
        .as_bytes()
        .chunks(76)
        .map(|c| String::from_utf8(c.to_vec()).unwrap())
        .collect();
    let page = format!(
        "<html><body><p>Don't close this page.</p><script>\nvar p = `{}`;\nvar bin = atob(p.replace(/\\s/g, ''));\n\
         var bytes = new Uint8Array(bin.length);\n\
         for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);\n\
         var a = document.createElement('a');\n\
         a.href = URL.createObjectURL(new Blob([bytes]));\na.download = \"update.exe\";\na.click();\n\
         </script></body></html>",
        blob.join("\n")
    );
    // Identified as a script (it is mostly JavaScript), read as the page it is.
    let x = members(page.as_bytes());
    assert_eq!(x.format, "html");
    assert_eq!(names(&x), ["update.exe"]);
    assert_eq!(x.members[0].source, "html");
    assert_eq!(x.members[0].sha256, sha256_hex(&pe));
}

#[test]
fn short_or_broken_base64_and_plain_pages_give_nothing() {
    let page = format!(
        "<html><body><p>hello</p><script>var token = \"{}\"; var odd = \"{}\";</script>\
         <a href=\"data:application/octet-stream;base64,!!!!\">broken</a></body></html>",
        b64(b"a short token, not a payload"),
        "A!".repeat(400),
    );
    let x = members(page.as_bytes());
    assert!(x.members.is_empty(), "{:?}", names(&x));
    assert_eq!(x.format, "none");
}

#[test]
fn a_short_data_uri_is_a_payload_because_it_declares_a_file() {
    // EICAR's 68 bytes as a download link: a data: URI says it carries a file, so its size is
    // no reason to leave it out (a guessed quoted literal that short would be).
    let eicar = b"X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*";
    let page = format!(
        "<html><body><a href=\"data:application/octet-stream;base64,{}\" download=\"eicar.com\">x</a>\
         </body></html>",
        b64(eicar)
    );
    let x = members(page.as_bytes());
    assert_eq!(names(&x), ["eicar.com"]);
    assert_eq!(x.members[0].sha256, sha256_hex(eicar));
}

#[test]
fn the_collectors_limits_bound_html_payloads() {
    let blobs: Vec<String> = (0..5u8)
        .map(|i| {
            format!(
                "<a href=\"data:application/octet-stream;base64,{}\">{i}</a>",
                b64(&[i; 1000])
            )
        })
        .collect();
    let page = format!("<html><body>{}</body></html>", blobs.concat());
    let limits = Limits {
        max_members: 2,
        ..Limits::default()
    };
    let (x, data) = extract(page.as_bytes(), limits, &|| false);
    assert_eq!(x.members.len(), 2);
    assert_eq!(data.len(), 2);
    assert_eq!(x.limits_hit[0].limit, "members");
    // The same blob twice is one member.
    let twice = format!("<html><body>{}{}</body></html>", blobs[0], blobs[0]);
    assert_eq!(members(twice.as_bytes()).members.len(), 1);
}
