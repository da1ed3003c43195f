//! Zip archives (automation-file's zip_ops). Extraction never writes outside its target
//! directory: member names are confined and symlink members are written as plain files.

use std::{
    fs::{self, File},
    io::{BufReader, BufWriter, Read, Write},
    path::Path,
    sync::Arc,
};

use base64::Engine;
use maljan_server::{Registry, ToolContext, ToolError, ToolMeta, Write as Create, blocking};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use zip::{CompressionMethod, ZipArchive, ZipWriter, result::ZipError, write::SimpleFileOptions};

use crate::{
    Config,
    paths::{Opened, copy_data, io_err, show},
    unzip::{Unzip, extract},
};

/// The most bytes FA_read_zip_file returns inline.
const MAX_INLINE: u64 = 64 * 1024 * 1024;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ZipDirArgs {
    /// The directory whose contents are zipped.
    dir_we_want_to_zip: String,
    /// The archive's path without `.zip` (it is appended, as shutil.make_archive does).
    zip_name: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ZipFileArgs {
    /// The archive written (replaced if it exists).
    zip_file_path: String,
    /// One file or a list of files, stored under their base names.
    file: OneOrMany,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadZipArgs {
    /// The archive.
    zip_file_path: String,
    /// The member's name inside it.
    file_name: String,
    /// The password of an encrypted member (ZipCrypto or AES), as text.
    #[serde(default)]
    password: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UnzipFileArgs {
    /// The archive.
    zip_file_path: String,
    /// The member to extract.
    extract_member: String,
    /// The directory to extract into (created if missing); the archive's directory when absent.
    #[serde(default)]
    extract_path: Option<String>,
    /// The password of encrypted members, as text.
    #[serde(default)]
    password: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UnzipAllArgs {
    /// The archive.
    zip_file_path: String,
    /// Only these members; every member when absent.
    #[serde(default)]
    extract_member: Option<Vec<String>>,
    /// The directory to extract into (created if missing); the archive's directory when absent.
    #[serde(default)]
    extract_path: Option<String>,
    /// The password of encrypted members, as text.
    #[serde(default)]
    password: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ZipPathArgs {
    /// The archive.
    zip_file_path: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SetPasswordArgs {
    /// The archive.
    zip_file_path: String,
    /// The password to check against its encrypted members, as text.
    password: String,
}

#[derive(Serialize, JsonSchema)]
pub(crate) struct ArchiveOut {
    pub(crate) path: String,
    /// Members written.
    pub(crate) members: usize,
}

#[derive(Serialize, JsonSchema)]
struct ContentOut {
    name: String,
    size: u64,
    /// The member's bytes, base64.
    content_b64: String,
    /// The same bytes as text when they are UTF-8.
    text: Option<String>,
}

#[derive(Serialize, JsonSchema)]
pub(crate) struct NamesOut {
    /// Member names (or paths written, for extraction).
    pub(crate) names: Vec<String>,
    pub(crate) count: usize,
}

/// One member as Python's ZipInfo describes it.
#[derive(Serialize, JsonSchema)]
struct ZipInfoOut {
    filename: String,
    file_size: u64,
    compress_size: u64,
    compress_type: String,
    /// [year, month, day, hour, minute, second]
    date_time: Option<[u16; 6]>,
    #[serde(rename = "CRC")]
    crc: u32,
    is_dir: bool,
    encrypted: bool,
    unix_mode: Option<u32>,
}

#[derive(Serialize, JsonSchema)]
struct ZipInfoListOut {
    members: Vec<ZipInfoOut>,
    count: usize,
}

#[derive(Serialize, JsonSchema)]
struct PasswordOut {
    /// Encrypted members in the archive.
    encrypted_members: usize,
    /// Whether the password opens every encrypted member (true when there are none).
    password_ok: bool,
}

pub(crate) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_zip_dir",
            "Zip a directory's contents into <zip_name>.zip (deflate).",
        )
        .destructive()
        .timeout_s(1800),
        move |ctx: ToolContext, a: ZipDirArgs| {
            let c = c.clone();
            async move {
                let dir = c.existing_dir(&a.dir_we_want_to_zip)?;
                let zip_path = c.target(&format!("{}.zip", a.zip_name))?;
                blocking(move || {
                    let members = zip_dir(&c, &dir, &zip_path, &a.zip_name, &ctx)?;
                    Ok(ArchiveOut {
                        path: show(&zip_path),
                        members,
                    })
                })
                .await
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_zip_file",
            "Write one or more files into a new zip archive under their base names.",
        )
        .destructive()
        .timeout_s(1800),
        move |ctx: ToolContext, a: ZipFileArgs| {
            let c = c.clone();
            async move {
                let files = match a.file {
                    OneOrMany::One(f) => vec![f],
                    OneOrMany::Many(v) => v,
                };
                if files.is_empty() {
                    return Err(ToolError::bad_argument("file must name at least one file"));
                }
                let sources = files
                    .iter()
                    .map(|f| c.existing_file(f))
                    .collect::<Result<Vec<_>, _>>()?;
                let zip_path = c.target(&a.zip_file_path)?;
                let names = member_names(&sources, &a.zip_file_path)?;
                blocking(move || {
                    // Written beside the target and renamed over it: a failure leaves no
                    // half-written archive (and an older one at that path untouched).
                    c.roots
                        .write_atomic_with(&zip_path, &a.zip_file_path, |out| {
                            let mut zw = ZipWriter::new(BufWriter::new(out));
                            for (src, name) in sources.iter().zip(names) {
                                zw.start_file(
                                    name,
                                    file_options(src.file.metadata().ok().as_ref()),
                                )
                                .map_err(zip_err(&a.zip_file_path))?;
                                copy_data(&src.file, &mut zw, &a.zip_file_path, &|| {
                                    ctx.is_cancelled()
                                })?;
                            }
                            zw.finish()
                                .map_err(zip_err(&a.zip_file_path))?
                                .flush()
                                .map_err(io_err(&a.zip_file_path))
                        })?;
                    Ok(ArchiveOut {
                        path: show(&zip_path),
                        members: sources.len(),
                    })
                })
                .await
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_read_zip_file",
            "Read one member of a zip archive; answers its bytes as base64 (and text).",
        )
        .timeout_s(300),
        move |_ctx, a: ReadZipArgs| {
            let c = c.clone();
            async move {
                let path = c.existing_file(&a.zip_file_path)?;
                blocking(move || {
                    let mut archive = open_zip(path)?;
                    let mut member = by_name(&mut archive, &a.file_name, a.password.as_deref())?;
                    if member.size() > MAX_INLINE {
                        return Err(ToolError::bad_argument(format!(
                            "{} is {} bytes; at most {MAX_INLINE} are returned inline",
                            a.file_name,
                            member.size()
                        ))
                        .with_remediation("extract it with FA_unzip_file instead"));
                    }
                    let mut data = Vec::with_capacity(member.size() as usize);
                    member
                        .by_ref()
                        .take(MAX_INLINE + 1)
                        .read_to_end(&mut data)
                        .map_err(|e| member_err(&a.file_name, e))?;
                    let text = String::from_utf8(data.clone()).ok();
                    Ok(ContentOut {
                        name: a.file_name,
                        size: data.len() as u64,
                        content_b64: base64::engine::general_purpose::STANDARD.encode(&data),
                        text,
                    })
                })
                .await
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_unzip_file",
            "Extract one member of a zip archive into a directory.",
        )
        .destructive()
        .timeout_s(1800),
        move |ctx: ToolContext, a: UnzipFileArgs| {
            let u = Unzip {
                zip_file_path: a.zip_file_path,
                members: Some(vec![a.extract_member]),
                extract_path: a.extract_path,
                password: a.password,
            };
            extract(c.clone(), ctx, u)
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_unzip_all",
            "Extract every member (or the listed ones) of a zip archive into a directory.",
        )
        .destructive()
        .timeout_s(3600),
        move |ctx: ToolContext, a: UnzipAllArgs| {
            let u = Unzip {
                zip_file_path: a.zip_file_path,
                members: a.extract_member,
                extract_path: a.extract_path,
                password: a.password,
            };
            extract(c.clone(), ctx, u)
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_zip_info",
            "Describe every member of a zip archive (sizes, method, date, CRC, encryption).",
        )
        .timeout_s(120),
        move |_ctx, a: ZipPathArgs| {
            let c = c.clone();
            async move {
                let path = c.existing_file(&a.zip_file_path)?;
                blocking(move || {
                    let mut archive = open_zip(path)?;
                    let mut members = Vec::with_capacity(archive.len());
                    for i in 0..archive.len() {
                        let m = archive.by_index_raw(i).map_err(zip_err(&a.zip_file_path))?;
                        members.push(ZipInfoOut {
                            filename: m.name().map(|n| n.into_owned()).unwrap_or_default(),
                            file_size: m.size(),
                            compress_size: m.compressed_size(),
                            compress_type: format!("{:?}", m.compression()),
                            date_time: m.last_modified().map(|d| {
                                [
                                    d.year(),
                                    d.month().into(),
                                    d.day().into(),
                                    d.hour().into(),
                                    d.minute().into(),
                                    d.second().into(),
                                ]
                            }),
                            crc: m.crc32(),
                            is_dir: m.is_dir(),
                            encrypted: m.encrypted(),
                            unix_mode: m.unix_mode(),
                        });
                    }
                    Ok(ZipInfoListOut {
                        count: members.len(),
                        members,
                    })
                })
                .await
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_zip_file_info",
            "List the member names of a zip archive.",
        )
        .timeout_s(120),
        move |_ctx, a: ZipPathArgs| {
            let c = c.clone();
            async move {
                let path = c.existing_file(&a.zip_file_path)?;
                blocking(move || {
                    let archive = open_zip(path)?;
                    let names: Vec<String> = archive
                        .file_names()
                        .filter_map(Result::ok)
                        .map(|n| n.into_owned())
                        .collect();
                    Ok(NamesOut {
                        count: names.len(),
                        names,
                    })
                })
                .await
            }
        },
    );

    let c = cfg.clone();
    reg.add(
        ToolMeta::new(
            "FA_set_zip_password",
            "Check a password against a zip archive's encrypted members. (automation-file only sets it on a handle \
             it then closes; here every zip action takes `password` itself.)",
        )
        .timeout_s(300),
        move |_ctx, a: SetPasswordArgs| {
            let c = c.clone();
            async move {
                let path = c.existing_file(&a.zip_file_path)?;
                blocking(move || {
                    let mut archive = open_zip(path)?;
                    let mut encrypted = 0;
                    let mut ok = true;
                    for i in 0..archive.len() {
                        if !archive.by_index_raw(i).map_err(zip_err(&a.zip_file_path))?.encrypted() {
                            continue;
                        }
                        encrypted += 1;
                        match archive.by_index_decrypt(i, a.password.as_bytes()) {
                            Ok(mut f) => {
                                // ZipCrypto's header check passes 1 in 256 wrong passwords; the CRC
                                // at the end of the member is the real test.
                                if std::io::copy(&mut f, &mut std::io::sink()).is_err() {
                                    ok = false;
                                }
                            }
                            Err(ZipError::InvalidPassword) => ok = false,
                            Err(e) => return Err(zip_err(&a.zip_file_path)(e)),
                        }
                    }
                    Ok(PasswordOut { encrypted_members: encrypted, password_ok: ok })
                })
                .await
            }
        },
    );
}

fn file_options(meta: Option<&fs::Metadata>) -> SimpleFileOptions {
    let mut opts = SimpleFileOptions::default()
        .compression_method(CompressionMethod::Deflated)
        .large_file(false);
    if let Some(meta) = meta {
        use std::os::unix::fs::PermissionsExt;
        opts = opts
            .unix_permissions(meta.permissions().mode() & 0o777)
            .large_file(meta.len() >= u32::MAX as u64);
        if let Some(dt) = meta
            .modified()
            .ok()
            .map(chrono::DateTime::<chrono::Local>::from)
            .and_then(|t| {
                use chrono::{Datelike, Timelike};
                zip::DateTime::from_date_and_time(
                    t.year().clamp(1980, 2107) as u16,
                    t.month() as u8,
                    t.day() as u8,
                    t.hour() as u8,
                    t.minute() as u8,
                    t.second().min(59) as u8,
                )
                .ok()
            })
        {
            opts = opts.last_modified_time(dt);
        }
    }
    opts
}

pub(crate) fn zip_err(given: &str) -> impl Fn(ZipError) -> ToolError + '_ {
    move |e| match e {
        ZipError::Io(io) => ToolError::io(given, io),
        ZipError::InvalidArchive(_) | ZipError::UnsupportedArchive(_) => {
            ToolError::unsupported_format(format!("{given} is not a readable zip archive: {e}"))
        }
        ZipError::FileNotFound => ToolError::no_such_file(format!("no such member in {given}")),
        ZipError::InvalidPassword => {
            ToolError::bad_argument(format!("wrong or missing password for {given}"))
        }
        other => ToolError::unsupported_format(format!("{given}: {other}")),
    }
}

pub(crate) fn member_err(name: &str, e: std::io::Error) -> ToolError {
    if e.kind() == std::io::ErrorKind::InvalidData || e.kind() == std::io::ErrorKind::InvalidInput {
        ToolError::bad_argument(format!(
            "{name} could not be read: wrong password or corrupt data ({e})"
        ))
    } else {
        ToolError::tool_failed(format!("{name}: {e}"))
    }
}

/// A zip archive read from the handle that was opened (and checked) under the roots.
pub(crate) fn open_zip(opened: Opened) -> Result<ZipArchive<BufReader<File>>, ToolError> {
    ZipArchive::new(BufReader::new(opened.file)).map_err(zip_err(&opened.given))
}

pub(crate) fn by_name<'a>(
    archive: &'a mut ZipArchive<BufReader<File>>,
    name: &str,
    password: Option<&str>,
) -> Result<zip::read::ZipFile<'a, BufReader<File>>, ToolError> {
    let index = archive.index_for_name(name).ok_or_else(|| {
        ToolError::no_such_file(format!("no member named '{name}' in the archive"))
    })?;
    let encrypted = archive
        .by_index_raw(index)
        .map(|m| m.encrypted())
        .unwrap_or(false);
    let result = match (encrypted, password) {
        (true, Some(p)) => archive.by_index_decrypt(index, p.as_bytes()),
        (true, None) => {
            return Err(ToolError::bad_argument(format!(
                "{name} is encrypted; pass its password"
            )));
        }
        (false, _) => archive.by_index(index),
    };
    result.map_err(|e| match e {
        ZipError::InvalidPassword => ToolError::bad_argument(format!("wrong password for {name}")),
        ZipError::UnsupportedArchive(m) => ToolError::unsupported_format(format!("{name}: {m}")),
        other => ToolError::unsupported_format(format!("{name}: {other}")),
    })
}

/// The base name each source is stored under. Two sources of one base name are refused before
/// anything is written: automation-file writes both under that name (Python warns "Duplicate
/// name"), and an unzip then keeps only one of them, silently.
fn member_names(sources: &[Opened], given: &str) -> Result<Vec<String>, ToolError> {
    let mut first_of: std::collections::HashMap<String, &str> = Default::default();
    let mut names = Vec::with_capacity(sources.len());
    for src in sources {
        let name = src
            .path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        if let Some(first) = first_of.insert(name.clone(), &src.given) {
            return Err(ToolError::bad_argument(format!(
                "{first} and {} would both be stored in {given} as '{name}'",
                src.given
            ))
            .with_remediation("zip files of one base name into separate archives, or rename one"));
        }
        names.push(name);
    }
    Ok(names)
}

fn zip_dir(
    c: &Config,
    dir: &Path,
    zip_path: &Path,
    given: &str,
    ctx: &ToolContext,
) -> Result<usize, ToolError> {
    if let Some(parent) = zip_path.parent() {
        c.roots.create_dir_all(parent, given)?;
    }
    let out = c.roots.create_file(zip_path, given, Create::Truncate)?;
    let mut zw = ZipWriter::new(BufWriter::with_capacity(1 << 20, out));
    let mut members = 0;
    for entry in walkdir::WalkDir::new(dir)
        .follow_links(false)
        .min_depth(1)
        .sort_by_file_name()
    {
        if ctx.is_cancelled() {
            return Err(ToolError::tool_failed("the call was cancelled"));
        }
        let Ok(entry) = entry else { continue };
        if entry.path() == zip_path {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(dir) else {
            continue;
        };
        let name = rel.to_string_lossy().replace('\\', "/");
        let ft = entry.file_type();
        if ft.is_dir() {
            zw.add_directory(
                format!("{name}/"),
                file_options(entry.metadata().ok().as_ref()),
            )
            .map_err(zip_err(given))?;
        } else if ft.is_file() {
            let f = c.open_resolved(entry.path())?;
            zw.start_file(name, file_options(f.file.metadata().ok().as_ref()))
                .map_err(zip_err(given))?;
            copy_data(&f.file, &mut zw, given, &|| ctx.is_cancelled())?;
        } else {
            // Symlinks are skipped: following one could pull in content from outside the roots.
            continue;
        }
        members += 1;
    }
    zw.finish()
        .map_err(zip_err(given))?
        .flush()
        .map_err(io_err(given))?;
    Ok(members)
}
