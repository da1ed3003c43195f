//! The rest of `FA_drive_*`: the searches (`files.list` with a query or a `fields` pattern,
//! every page followed, answered as automation-file does: `{name: id}`), the shares
//! (`permissions.create` for a user, a domain or anyone) and the download of a folder's files.

use std::{collections::BTreeMap, sync::Arc};

use maljan_server::{Registry, ToolContext, ToolError, ToolMeta};
use reqwest::Method;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    Api, Drives, ProfileOnly, Service, TRANSFER_TIMEOUT_S, encode_segment, google, plain_id, str_of,
};
use crate::storage::default_profile;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ByMime {
    /// e.g. `application/pdf`, `application/vnd.google-apps.folder`.
    mime_type: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ByFields {
    /// A `fields` pattern for files.list, e.g. `nextPageToken, files(id, name)`; the answer is
    /// built from each file's name and id, so the pattern should keep them.
    field_pattern: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FromFolder {
    /// The Drive folder (by name; the first of that name) whose files are downloaded, each to
    /// a local file of its name (relative paths resolve as everywhere, under the roots).
    folder_name: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

fn reader() -> String {
    "reader".into()
}

fn writer() -> String {
    "writer".into()
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ToUser {
    file_id: String,
    /// The user's email address.
    user: String,
    #[serde(default = "writer")]
    #[schemars(default = "writer")]
    user_role: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ToAnyone {
    file_id: String,
    #[serde(default = "reader")]
    #[schemars(default = "reader")]
    share_role: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ToDomain {
    file_id: String,
    /// e.g. `example.com`.
    domain: String,
    #[serde(default = "reader")]
    #[schemars(default = "reader")]
    domain_role: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

/// A string literal of the Drive query language.
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
}

fn query_url(api: &Api, q: Option<&str>, fields: &str, page: Option<&str>) -> String {
    let mut f = url::form_urlencoded::Serializer::new(String::new());
    if let Some(q) = q {
        f.append_pair("q", q);
    }
    f.append_pair("fields", fields)
        .append_pair("pageSize", "1000");
    if let Some(p) = page {
        f.append_pair("pageToken", p);
    }
    format!("{}/files?{}", api.api_url, f.finish())
}

/// Every file a query finds (all pages).
async fn search(api: &Api, q: Option<&str>, fields: &str) -> Result<Vec<Value>, ToolError> {
    let first = api.request(Method::GET, &query_url(api, q, fields, None))?;
    api.pages(first, "files", |page| match str_of(page, "nextPageToken") {
        Some(token) => api
            .request(Method::GET, &query_url(api, q, fields, Some(&token)))
            .map(Some),
        None => Ok(None),
    })
    .await
}

fn by_name(files: &[Value]) -> BTreeMap<String, String> {
    files
        .iter()
        .filter_map(|f| Some((str_of(f, "name")?, str_of(f, "id")?)))
        .collect()
}

const ROLES: [&str; 6] = [
    "reader",
    "commenter",
    "writer",
    "fileOrganizer",
    "organizer",
    "owner",
];

const LISTED: &str = "nextPageToken,files(id,name,mimeType,size)";

async fn share(api: &Api, file_id: &str, body: Value) -> Result<Value, ToolError> {
    let id = plain_id("file_id", file_id)?;
    let role = body.get("role").and_then(Value::as_str).unwrap_or_default();
    if !ROLES.contains(&role) {
        return Err(ToolError::bad_argument(format!(
            "{role:?} is not a Drive role ({})",
            ROLES.join(", ")
        )));
    }
    let url = format!(
        "{}/files/{}/permissions?fields=id,type,role",
        api.api_url,
        encode_segment(&id)
    );
    api.json(api.request(Method::POST, &url)?.json(&body)).await
}

async fn download_folder(
    api: &Api,
    ctx: &ToolContext,
    c: &crate::Config,
    folder_name: &str,
) -> Result<BTreeMap<String, String>, ToolError> {
    let q = format!(
        "mimeType = '{}' and name = {} and trashed = false",
        google::FOLDER_MIME,
        quoted(folder_name)
    );
    let folders = search(api, Some(&q), "nextPageToken,files(id,name)").await?;
    let Some(folder) = folders.first().and_then(|f| str_of(f, "id")) else {
        return Err(ToolError::no_such_file(format!(
            "Google Drive has no folder named {folder_name:?}"
        )));
    };
    let q = format!("{} in parents and trashed = false", quoted(&folder));
    let mut out = BTreeMap::new();
    for f in search(api, Some(&q), LISTED).await? {
        let (Some(name), Some(id)) = (str_of(&f, "name"), str_of(&f, "id")) else {
            continue;
        };
        if str_of(&f, "mimeType").is_some_and(|m| m.starts_with("application/vnd.google-apps.")) {
            continue; // folders and Google documents hold no bytes to download
        }
        if name.contains(['/', '\\']) || name == "." || name == ".." {
            return Err(ToolError::bad_argument(format!(
                "the Drive file {name:?} cannot be a local file name"
            )));
        }
        google::download(api, ctx, c, &id, &name).await?;
        out.insert(name, id);
    }
    Ok(out)
}

pub(super) fn register(reg: &mut Registry, drives: &Arc<Drives>) {
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_drive_search_all_file",
            "Every Google Drive file the token sees, as {name: id} (every page).",
        )
        .open_world()
        .timeout_s(600),
        move |_ctx: ToolContext, a: ProfileOnly| {
            let d = d.clone();
            async move {
                let api = d.api(Service::Google, &a.profile)?;
                Ok::<_, ToolError>(by_name(&search(&api, None, LISTED).await?))
            }
        },
    );
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_drive_search_file_mimetype",
            "The Google Drive files of one MIME type, as {name: id} (every page).",
        )
        .open_world()
        .timeout_s(600),
        move |_ctx: ToolContext, a: ByMime| {
            let d = d.clone();
            async move {
                let api = d.api(Service::Google, &a.profile)?;
                let q = format!("mimeType = {}", quoted(&a.mime_type));
                Ok::<_, ToolError>(by_name(&search(&api, Some(&q), LISTED).await?))
            }
        },
    );
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_drive_search_field",
            "Google Drive files listed with a custom `fields` pattern, as {name: id}.",
        )
        .open_world()
        .timeout_s(600),
        move |_ctx: ToolContext, a: ByFields| {
            let d = d.clone();
            async move {
                let api = d.api(Service::Google, &a.profile)?;
                if a.field_pattern.trim().is_empty()
                    || a.field_pattern.chars().any(char::is_control)
                {
                    return Err(ToolError::bad_argument(
                        "field_pattern is empty or holds a control character",
                    ));
                }
                Ok(by_name(&search(&api, None, &a.field_pattern).await?))
            }
        },
    );
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_drive_download_file_from_folder",
            "Download every file of the Google Drive folder named folder_name, each to a local file \
             of its name; returns {name: id}.",
        )
        .destructive()
        .open_world()
        .timeout_s(TRANSFER_TIMEOUT_S),
        move |ctx: ToolContext, a: FromFolder| {
            let d = d.clone();
            async move {
                let api = d.api(Service::Google, &a.profile)?;
                download_folder(&api, &ctx, &d.cfg, &a.folder_name).await
            }
        },
    );
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_drive_share_file_to_user",
            "Share a Google Drive file with a user (by email) in a role (default writer).",
        )
        .writes()
        .not_idempotent()
        .open_world()
        .timeout_s(60),
        move |_ctx: ToolContext, a: ToUser| {
            let d = d.clone();
            async move {
                let api = d.api(Service::Google, &a.profile)?;
                let body = json!({"type": "user", "role": a.user_role, "emailAddress": a.user});
                share(&api, &a.file_id, body).await
            }
        },
    );
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_drive_share_file_to_anyone",
            "Share a Google Drive file with anyone who has the link, in a role (default reader).",
        )
        .writes()
        .not_idempotent()
        .open_world()
        .timeout_s(60),
        move |_ctx: ToolContext, a: ToAnyone| {
            let d = d.clone();
            async move {
                let api = d.api(Service::Google, &a.profile)?;
                share(
                    &api,
                    &a.file_id,
                    json!({"type": "anyone", "role": a.share_role}),
                )
                .await
            }
        },
    );
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_drive_share_file_to_domain",
            "Share a Google Drive file with everyone in a domain, in a role (default reader).",
        )
        .writes()
        .not_idempotent()
        .open_world()
        .timeout_s(60),
        move |_ctx: ToolContext, a: ToDomain| {
            let d = d.clone();
            async move {
                let api = d.api(Service::Google, &a.profile)?;
                let body = json!({"type": "domain", "role": a.domain_role, "domain": a.domain});
                share(&api, &a.file_id, body).await
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_literals_are_escaped() {
        assert_eq!(quoted("it's"), r"'it\'s'");
        assert_eq!(quoted(r"a\b"), r"'a\\b'");
    }
}
