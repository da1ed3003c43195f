//! Microsoft Graph v1.0, the drive-item routes `FA_onedrive_*` use, addressed by path under
//! `/me/drive/root`: `GET` an item, `GET …/children` (pages of [`PAGE`], `@odata.nextLink`),
//! `GET …:/content` (a 302 to the item's pre-authenticated download link), `PUT …:/content`
//! (a simple upload), `POST …:/createUploadSession` (pieces `PUT` to the session's `uploadUrl`
//! with `Content-Range`, 202 until the last, then the item), `DELETE`. Errors are Graph's
//! `{"error": {"code", "message"}}`. And the identity platform's device-code grant: the OpenID
//! configuration, `/devicecode`, and `/token`, which answers `authorization_pending` once,
//! then the fixture's token (or `authorization_declined` when the test asked).

use axum::{
    http::{Method, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};

use super::{
    Fixture, Req, content_response, json_response, percent_decode,
    tree::{Tree, Uploads, content_range},
};

const PAGE: usize = 3;

pub(crate) struct OneDrive {
    tree: Tree,
    uploads: Uploads,
    /// device_code → polls so far.
    logins: std::collections::HashMap<String, u32>,
}

impl Default for OneDrive {
    fn default() -> Self {
        Self {
            tree: Tree::new("root0001", "root", "item"),
            uploads: Uploads::default(),
            logins: Default::default(),
        }
    }
}

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    json_response(
        status,
        &json!({"error": {"code": code, "message": message}}),
    )
}

fn item_json(d: &OneDrive, id: &str, base: &str) -> Value {
    let Some(i) = d.tree.get(id) else {
        return Value::Null;
    };
    let path = d.tree.path_of(id);
    let parent_path = if path.len() <= 1 {
        "/drive/root:".to_string()
    } else {
        format!("/drive/root:/{}", path[..path.len() - 1].join("/"))
    };
    let mut v = json!({
        "id": i.id,
        "name": i.name,
        "eTag": format!("\"{},{}\"", i.id, i.version),
        "createdDateTime": "2026-01-01T00:00:00Z",
        "lastModifiedDateTime": "2026-01-01T00:00:00Z",
        "parentReference": {"driveId": "fixturedrive", "driveType": "personal", "path": parent_path,
                            "id": i.parent.clone().unwrap_or_default()},
    });
    match &i.data {
        Some(data) => {
            v["size"] = json!(data.len());
            v["file"] = json!({"mimeType": i.mime, "hashes": {"sha256Hash": super::sha256_hex(data).to_uppercase()}});
            v["@microsoft.graph.downloadUrl"] = json!(format!(
                "{base}/public.onedrive.fixture/dl/{}?tempauth=fixture",
                i.id
            ));
        }
        None => {
            v["size"] = json!(0);
            v["folder"] = json!({"childCount": d.tree.children(id).len()});
            if i.parent.is_none() {
                v["root"] = json!({});
            }
        }
    }
    v
}

/// `root`, `root/children`, `root:/a/b`, `root:/a/b:`, `root:/a/b:/content`… as (segments, action).
fn address(rest: &str) -> Option<(Vec<String>, String)> {
    if rest == "root" {
        return Some((Vec::new(), String::new()));
    }
    if let Some(action) = rest.strip_prefix("root/") {
        return Some((Vec::new(), action.to_string()));
    }
    let p = rest.strip_prefix("root:")?;
    let (path, action) = match p.find(":/") {
        Some(i) => (&p[..i], p[i + 2..].to_string()),
        None => (p.trim_end_matches(':'), String::new()),
    };
    let segments = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(percent_decode)
        .collect();
    Some((segments, action))
}

pub(super) fn handle(fx: &Fixture, req: &Req) -> Response {
    let Some(rest) = req.path.strip_prefix("/v1.0/me/drive/") else {
        return error(
            StatusCode::BAD_REQUEST,
            "invalidRequest",
            "unknown Graph route",
        );
    };
    let Some((segments, action)) = address(rest) else {
        return error(
            StatusCode::BAD_REQUEST,
            "invalidRequest",
            "unknown item address",
        );
    };
    let base = req.base();
    let mut s = fx.state.lock().unwrap();
    let d = &mut s.onedrive;
    let found = d.tree.at(&segments).map(|i| i.id.clone());
    match (&req.method, action.as_str()) {
        (&Method::GET, "") => match found {
            Some(id) => json_response(StatusCode::OK, &item_json(d, &id, &base)),
            None => error(
                StatusCode::NOT_FOUND,
                "itemNotFound",
                "The resource could not be found.",
            ),
        },
        (&Method::GET, "children") => {
            let Some(id) = found.filter(|id| d.tree.is_folder(id)) else {
                return error(
                    StatusCode::NOT_FOUND,
                    "itemNotFound",
                    "The resource could not be found.",
                );
            };
            let skip: usize = req
                .param("$skiptoken")
                .and_then(|t| t.parse().ok())
                .unwrap_or(0);
            let kids: Vec<String> = d.tree.children(&id).iter().map(|i| i.id.clone()).collect();
            let value: Vec<Value> = kids
                .iter()
                .skip(skip)
                .take(PAGE)
                .map(|k| item_json(d, k, &base))
                .collect();
            let mut page = json!({"value": value});
            if skip + PAGE < kids.len() {
                page["@odata.nextLink"] = json!(format!(
                    "{base}/graph.microsoft.com{}?$skiptoken={}",
                    req.path,
                    skip + PAGE
                ));
            }
            json_response(StatusCode::OK, &page)
        }
        (&Method::GET, "content") => match found.filter(|id| !d.tree.is_folder(id)) {
            Some(id) => (
                StatusCode::FOUND,
                [(
                    header::LOCATION,
                    format!("{base}/public.onedrive.fixture/dl/{id}?tempauth=fixture"),
                )],
            )
                .into_response(),
            None => error(
                StatusCode::NOT_FOUND,
                "itemNotFound",
                "The resource could not be found.",
            ),
        },
        (&Method::PUT, "content") => {
            let Some((name, dirs)) = segments.split_last() else {
                return error(StatusCode::BAD_REQUEST, "invalidRequest", "no file name");
            };
            let parent = d.tree.folders(dirs);
            let id = d.tree.put(&parent, name, req.body.to_vec());
            json_response(StatusCode::CREATED, &item_json(d, &id, &base))
        }
        (&Method::POST, "createUploadSession") => {
            if segments.is_empty() {
                return error(StatusCode::BAD_REQUEST, "invalidRequest", "no file name");
            }
            let behavior = req
                .json()
                .pointer("/item/@microsoft.graph.conflictBehavior")
                .cloned();
            if found.is_some() && behavior.as_ref().and_then(Value::as_str) == Some("fail") {
                return error(
                    StatusCode::CONFLICT,
                    "nameAlreadyExists",
                    "The item exists.",
                );
            }
            let sid = d.uploads.start(None, json!(segments));
            json_response(
                StatusCode::OK,
                &json!({"uploadUrl": format!("{base}/public.onedrive.fixture/up/{sid}"),
                        "expirationDateTime": "2099-01-01T00:00:00Z", "nextExpectedRanges": ["0-"]}),
            )
        }
        (&Method::DELETE, "") => match found {
            Some(id) if id != d.tree.root => {
                d.tree.remove(&id);
                StatusCode::NO_CONTENT.into_response()
            }
            Some(_) => error(
                StatusCode::FORBIDDEN,
                "accessDenied",
                "The root cannot be deleted.",
            ),
            None => error(
                StatusCode::NOT_FOUND,
                "itemNotFound",
                "The resource could not be found.",
            ),
        },
        _ => error(
            StatusCode::BAD_REQUEST,
            "invalidRequest",
            "unknown Graph route",
        ),
    }
}

/// The links Graph hands out (no token): downloads and upload-session pieces.
pub(super) fn public(fx: &Fixture, req: &Req) -> Response {
    if let Some(id) = req.path.strip_prefix("/dl/") {
        let data = {
            let s = fx.state.lock().unwrap();
            s.onedrive.tree.get(id).and_then(|i| i.data.clone())
        };
        return match data {
            Some(data) => content_response(fx, req, data, &[]),
            None => error(StatusCode::NOT_FOUND, "itemNotFound", "gone"),
        };
    }
    let Some(sid) = req.path.strip_prefix("/up/") else {
        return error(StatusCode::NOT_FOUND, "itemNotFound", "no such link");
    };
    let base = req.base();
    let mut s = fx.state.lock().unwrap();
    let d = &mut s.onedrive;
    if req.method == Method::DELETE {
        return match d.uploads.open.remove(sid) {
            Some(_) => StatusCode::NO_CONTENT.into_response(),
            None => error(StatusCode::NOT_FOUND, "itemNotFound", "no such session"),
        };
    }
    if req.header("authorization").is_some() {
        return error(
            StatusCode::UNAUTHORIZED,
            "unauthenticated",
            "an upload URL takes no Authorization header",
        );
    }
    let Some(up) = d.uploads.open.get_mut(sid) else {
        return error(StatusCode::NOT_FOUND, "itemNotFound", "no such session");
    };
    let Some((Some((first, last)), total)) = req.header("content-range").and_then(content_range)
    else {
        return error(
            StatusCode::BAD_REQUEST,
            "invalidRequest",
            "a Content-Range is needed",
        );
    };
    if first != up.data.len() as u64 || last + 1 - first != req.body.len() as u64 || last >= total {
        return error(
            StatusCode::RANGE_NOT_SATISFIABLE,
            "invalidRange",
            "The uploaded fragment overlaps or skips",
        );
    }
    let is_last = last + 1 == total;
    if !is_last && !req.body.len().is_multiple_of(320 * 1024) {
        return error(
            StatusCode::BAD_REQUEST,
            "invalidRange",
            "fragments must be multiples of 320 KiB",
        );
    }
    up.data.extend_from_slice(&req.body);
    if !is_last {
        return json_response(
            StatusCode::ACCEPTED,
            &json!({"expirationDateTime": "2099-01-01T00:00:00Z", "nextExpectedRanges": [format!("{}-", last + 1)]}),
        );
    }
    let up = d.uploads.open.remove(sid).unwrap();
    let segments: Vec<String> = serde_json::from_value(up.target).unwrap_or_default();
    let (name, dirs) = segments.split_last().unwrap();
    let parent = d.tree.folders(dirs);
    let id = d.tree.put(&parent, name, up.data);
    json_response(StatusCode::CREATED, &item_json(d, &id, &base))
}

/// The identity platform: `/{tenant}/v2.0/.well-known/openid-configuration`,
/// `/{tenant}/oauth2/v2.0/devicecode`, `/{tenant}/oauth2/v2.0/token`.
pub(super) fn login(fx: &Fixture, req: &Req) -> Response {
    let oauth = |e: &str, d: &str| {
        json_response(
            StatusCode::BAD_REQUEST,
            &json!({"error": e, "error_description": d, "error_codes": [70000]}),
        )
    };
    let mut parts = req.path.trim_start_matches('/').splitn(2, '/');
    let tenant = parts.next().unwrap_or_default().to_string();
    let route = parts.next().unwrap_or_default();
    let base = format!("https://login.microsoftonline.com/{tenant}");
    match route {
        "v2.0/.well-known/openid-configuration" => json_response(
            StatusCode::OK,
            &json!({
                "issuer": format!("https://login.microsoftonline.com/{tenant}/v2.0"),
                "authorization_endpoint": format!("{base}/oauth2/v2.0/authorize"),
                "token_endpoint": format!("{base}/oauth2/v2.0/token"),
                "device_authorization_endpoint": format!("{base}/oauth2/v2.0/devicecode"),
                "end_session_endpoint": format!("{base}/oauth2/v2.0/logout"),
                "jwks_uri": format!("{base}/discovery/v2.0/keys"),
                "response_types_supported": ["code", "id_token", "code id_token", "id_token token"],
                "scopes_supported": ["openid", "profile", "email", "offline_access"],
                "token_endpoint_auth_methods_supported": ["client_secret_post", "private_key_jwt", "client_secret_basic"],
            }),
        ),
        "oauth2/v2.0/devicecode" => {
            let f = req.form();
            if f.get("client_id").is_none_or(String::is_empty) {
                return oauth(
                    "invalid_request",
                    "AADSTS900144: The request body must contain the following parameter: 'client_id'.",
                );
            }
            let mut s = fx.state.lock().unwrap();
            let code = format!("devicecode{}", s.next_id());
            s.onedrive.logins.insert(code.clone(), 0);
            json_response(
                StatusCode::OK,
                &json!({
                    "user_code": "FIXTURE1",
                    "device_code": code,
                    "verification_uri": "https://microsoft.com/devicelogin",
                    "expires_in": 900,
                    "interval": 1,
                    "message": "To sign in, use a web browser to open the page https://microsoft.com/devicelogin and enter the code FIXTURE1 to authenticate.",
                }),
            )
        }
        "oauth2/v2.0/token" => {
            let f = req.form();
            if f.get("grant_type").map(String::as_str)
                != Some("urn:ietf:params:oauth:grant-type:device_code")
            {
                return oauth(
                    "unsupported_grant_type",
                    "AADSTS70003: this fixture takes the device-code grant only",
                );
            }
            let code = f.get("device_code").cloned().unwrap_or_default();
            let mut s = fx.state.lock().unwrap();
            let declined = s.decline_logins;
            let Some(polls) = s.onedrive.logins.get_mut(&code) else {
                return oauth("bad_verification_code", "AADSTS70019: unknown device code");
            };
            *polls += 1;
            if declined {
                return oauth(
                    "authorization_declined",
                    "AADSTS70000: the user declined the sign-in",
                );
            }
            if *polls < 2 {
                return oauth(
                    "authorization_pending",
                    "AADSTS70016: OAuth 2.0 device flow error. Authorization is pending.",
                );
            }
            s.onedrive.logins.remove(&code);
            let scope = f
                .get("scope")
                .cloned()
                .unwrap_or_else(|| "Files.ReadWrite Files.ReadWrite.All".into());
            json_response(
                StatusCode::OK,
                &json!({"token_type": "Bearer", "scope": scope, "expires_in": 3600, "ext_expires_in": 3600,
                        "access_token": fx.token, "refresh_token": "fixture-refresh-token"}),
            )
        }
        _ => oauth("invalid_request", "unknown identity platform route"),
    }
}
