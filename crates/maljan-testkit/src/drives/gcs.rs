//! Google Cloud Storage's XML API, path-style, the part `object_store`'s GCS client and
//! google-cloud-storage's XML paths use: `PUT /{bucket}/{object}` (with
//! `x-goog-if-generation-match`, `x-goog-hash` checked), `GET`/`HEAD` (Range, `generation`,
//! `If-Match`, `If-None-Match`), `DELETE`, `GET /{bucket}?list-type=2` (a `ListBucketResult`, pages
//! of at most [`PAGE`] keys: fewer than max-keys, as the API allows), and XML multipart uploads
//! (`POST ?uploads`, `PUT ?partNumber&uploadId`, `POST ?uploadId` with a
//! `CompleteMultipartUpload`, `DELETE ?uploadId`). Buckets are made with the JSON API's
//! `POST /storage/v1/b`. Errors are the XML API's `<Error><Code>…</Code><Message>…</Message>
//! <Details>…</Details></Error>` with its statuses (404 NoSuchKey/NoSuchBucket/NoSuchUpload, 412
//! PreconditionFailed, 416 InvalidRange, 400 BadDigest/InvalidPart).
//!
//! Auth ([`auth`]): the one service account the fixture was given (`--gcs-key`), by a
//! self-signed JWT or a V4 signed URL, signatures verified.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
};

use axum::{
    body::Body,
    http::{Method, StatusCode, header},
    response::{IntoResponse, Response},
};
use base64::{
    Engine,
    prelude::{BASE64_STANDARD, BASE64_URL_SAFE_NO_PAD},
};
use chrono::{DateTime, Utc};
use md5::Digest;
use serde_json::json;

mod auth;

pub(crate) use auth::Account;

use super::{Fixture, Req, content_response, json_response, percent_decode};

/// Keys (and common prefixes) per listing page.
const PAGE: usize = 2;
const S3_NS: &str = "http://s3.amazonaws.com/doc/2006-03-01/";

#[derive(Default)]
pub(crate) struct Gcs {
    pub(crate) account: Option<Account>,
    buckets: BTreeMap<String, BTreeMap<String, Object>>,
    uploads: HashMap<String, Upload>,
    generation: u64,
}

struct Object {
    data: Arc<Vec<u8>>,
    generation: u64,
    etag: String,
    hash: String,
    modified: DateTime<Utc>,
}

struct Upload {
    bucket: String,
    key: String,
    parts: BTreeMap<u32, (String, Vec<u8>)>,
}

/// `x-goog-hash`'s value for these bytes: crc32c and md5, base64 of their big-endian bytes.
fn goog_hash(data: &[u8]) -> (String, String) {
    let crc = crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, data) as u32;
    let md5 = md5::Md5::digest(data);
    let hash = format!(
        "crc32c={},md5={}",
        BASE64_STANDARD.encode(crc.to_be_bytes()),
        BASE64_STANDARD.encode(md5)
    );
    (hash, format!("\"{}\"", hex::encode(md5)))
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

fn xml(status: StatusCode, body: String, extra: &[(&str, String)]) -> Response {
    let mut b = Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/xml; charset=UTF-8");
    for (k, v) in extra {
        b = b.header(*k, v);
    }
    let body = format!("<?xml version='1.0' encoding='UTF-8'?>{body}");
    b.body(Body::from(body)).unwrap()
}

/// The XML API's error answer for `code`, with its status and message.
fn fail(code: &str, details: &str) -> Response {
    let (status, message) = match code {
        "NoSuchBucket" => (404, "The specified bucket does not exist."),
        "NoSuchKey" => (404, "The specified key does not exist."),
        "NoSuchUpload" => (404, "The requested upload was not found."),
        "PreconditionFailed" => (
            412,
            "At least one of the pre-conditions you specified did not hold.",
        ),
        "InvalidRange" => (416, "The requested range cannot be satisfied."),
        "BadDigest" => (
            400,
            "The digest you specified did not match what we received.",
        ),
        "InvalidPart" | "InvalidPartOrder" => (
            400,
            "One or more of the specified parts could not be found or the ETag did not match.",
        ),
        "MalformedXML" => (400, "The XML you provided was not well-formed."),
        "InvalidArgument" | "ExpiredToken" => (400, "Invalid argument."),
        "AuthenticationRequired" => (401, "Authentication required."),
        "SignatureDoesNotMatch" => (403, "Access denied."),
        "MethodNotAllowed" => (
            405,
            "The specified method is not allowed against this resource.",
        ),
        _ => (
            501,
            "A header or query you provided requested a function that is not implemented.",
        ),
    };
    xml(
        StatusCode::from_u16(status).unwrap(),
        format!(
            "<Error><Code>{code}</Code><Message>{message}</Message><Details>{}</Details></Error>",
            xml_escape(details)
        ),
        &[],
    )
}

pub(super) fn handle(fx: &Fixture, req: &Req) -> Response {
    let json_api = req.path.starts_with("/storage/v1/");
    match auth::refused(fx, req) {
        Some(_) if json_api => {
            let e = json!({"code": 401, "message": "Invalid Credentials", "errors":
                [{"reason": "authError", "domain": "global", "message": "Invalid Credentials"}]});
            return json_response(StatusCode::UNAUTHORIZED, &json!({ "error": e }));
        }
        Some((code, why)) => return fail(code, why),
        None if json_api && req.path == "/storage/v1/b" && req.method == Method::POST => {
            return create_bucket(fx, req);
        }
        None => {}
    }
    // A path segment decoded: `+` is itself there, not a space.
    let decode = |s: &str| percent_decode(&s.replace('+', "%2B"));
    let rest = req.path.trim_start_matches('/');
    let (bucket, key) = match rest.split_once('/') {
        Some((b, k)) => (decode(b), decode(k)),
        None => (decode(rest), String::new()),
    };
    if !fx.state.lock().unwrap().gcs.buckets.contains_key(&bucket) {
        return fail("NoSuchBucket", &bucket);
    }
    let upload_id = req.param("uploadId");
    match (req.method.as_str(), key.is_empty(), upload_id) {
        ("GET", true, _) => list(fx, req, &bucket),
        ("POST", false, _) if req.param("uploads").is_some() => initiate(fx, &bucket, &key),
        ("POST", false, Some(id)) => complete(fx, req, &bucket, &key, &id),
        ("PUT", false, Some(id)) => put_part(fx, req, &id),
        ("PUT", false, None) => put(fx, req, &bucket, &key),
        ("DELETE", false, Some(id)) => match fx.state.lock().unwrap().gcs.uploads.remove(&id) {
            Some(_) => StatusCode::NO_CONTENT.into_response(),
            None => fail("NoSuchUpload", &id),
        },
        ("DELETE", false, None) => delete(fx, req, &bucket, &key),
        ("GET" | "HEAD", false, _) => get(fx, req, &bucket, &key),
        (m, ..) => fail("MethodNotAllowed", m),
    }
}

fn create_bucket(fx: &Fixture, req: &Req) -> Response {
    let name = req.json()["name"].as_str().unwrap_or_default().to_string();
    let mut s = fx.state.lock().unwrap();
    if name.is_empty() || s.gcs.buckets.contains_key(&name) {
        let (code, reason) = if name.is_empty() {
            (400, "required")
        } else {
            (409, "conflict")
        };
        let e = json!({"code": code, "message": format!("bucket {name:?}: {reason}"),
                       "errors": [{"reason": reason, "domain": "global", "message": reason}]});
        return json_response(StatusCode::from_u16(code).unwrap(), &json!({ "error": e }));
    }
    s.gcs.buckets.insert(name.clone(), BTreeMap::new());
    let now = Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    json_response(
        StatusCode::OK,
        &json!({"kind": "storage#bucket", "id": name, "name": name, "projectNumber": "0",
                "metageneration": "1", "location": "US", "storageClass": "STANDARD",
                "etag": "CAE=", "timeCreated": now, "updated": now}),
    )
}

/// Commits `data` as bucket/key under `x-goog-if-generation-match`; answers its generation.
fn commit(
    fx: &Fixture,
    req: &Req,
    to: (&str, &str),
    data: Vec<u8>,
    hash: String,
    etag: String,
) -> Result<u64, (&'static str, String)> {
    let mut s = fx.state.lock().unwrap();
    let current = s.gcs.buckets[to.0].get(to.1).map_or(0, |o| o.generation);
    if let Some(want) = req.header("x-goog-if-generation-match")
        && want.parse::<u64>().ok() != Some(current)
    {
        return Err(("PreconditionFailed", "x-goog-if-generation-match".into()));
    }
    let g = &mut s.gcs;
    g.generation = (Utc::now().timestamp_micros() as u64).max(g.generation + 1);
    let (generation, modified, data) = (g.generation, Utc::now(), Arc::new(data));
    let object = Object {
        data,
        generation,
        etag,
        hash,
        modified,
    };
    g.buckets
        .get_mut(to.0)
        .unwrap()
        .insert(to.1.to_string(), object);
    Ok(generation)
}

/// A BadDigest answer if a value of the request's `x-goog-hash` differs from the body's.
fn digest_mismatch(req: &Req, hash: &str) -> Option<Response> {
    let sent = req.header("x-goog-hash")?;
    let ours: Vec<&str> = hash.split(',').collect();
    let bad = sent.split(',').map(str::trim).find(|h| !ours.contains(h))?;
    Some(fail("BadDigest", bad.split('=').next().unwrap_or_default()))
}

fn put(fx: &Fixture, req: &Req, bucket: &str, key: &str) -> Response {
    let (hash, etag) = goog_hash(&req.body);
    if let Some(bad) = digest_mismatch(req, &hash) {
        return bad;
    }
    let body = req.body.to_vec();
    match commit(fx, req, (bucket, key), body, hash.clone(), etag.clone()) {
        Err((code, details)) => fail(code, &details),
        Ok(generation) => (
            StatusCode::OK,
            [
                ("etag", etag),
                ("x-goog-generation", generation.to_string()),
                ("x-goog-metageneration", "1".into()),
                ("x-goog-hash", hash),
                ("x-goog-stored-content-length", req.body.len().to_string()),
                ("x-goog-stored-content-encoding", "identity".into()),
            ],
        )
            .into_response(),
    }
}

fn initiate(fx: &Fixture, bucket: &str, key: &str) -> Response {
    let mut s = fx.state.lock().unwrap();
    let id = format!(
        "ABPnzm{:016x}",
        s.next_id().wrapping_mul(0x9e37_79b9_7f4a_7c15)
    );
    let (bucket, key) = (bucket.to_string(), key.to_string());
    let (b, k) = (xml_escape(&bucket), xml_escape(&key));
    let parts = BTreeMap::new();
    s.gcs
        .uploads
        .insert(id.clone(), Upload { bucket, key, parts });
    xml(
        StatusCode::OK,
        format!(
            "<InitiateMultipartUploadResult xmlns=\"{S3_NS}\"><Bucket>{b}</Bucket><Key>{k}</Key>\
             <UploadId>{id}</UploadId></InitiateMultipartUploadResult>"
        ),
        &[],
    )
}

fn put_part(fx: &Fixture, req: &Req, id: &str) -> Response {
    let number = req.param("partNumber").and_then(|n| n.parse::<u32>().ok());
    let Some(number) = number.filter(|n| (1..=10_000).contains(n)) else {
        return fail("InvalidArgument", "partNumber must be from 1 to 10000");
    };
    let (hash, etag) = goog_hash(&req.body);
    if let Some(bad) = digest_mismatch(req, &hash) {
        return bad;
    }
    let mut s = fx.state.lock().unwrap();
    let Some(upload) = s.gcs.uploads.get_mut(id) else {
        return fail("NoSuchUpload", id);
    };
    upload
        .parts
        .insert(number, (etag.clone(), req.body.to_vec()));
    (StatusCode::OK, [("etag", etag), ("x-goog-hash", hash)]).into_response()
}

/// The text of each `<tag>…</tag>` in `s`, in order.
fn elements<'a>(s: &'a str, tag: &str) -> Vec<&'a str> {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    (s.split(open.as_str()).skip(1))
        .filter_map(|p| p.split_once(close.as_str()).map(|(inner, _)| inner))
        .collect()
}

/// The parts a `CompleteMultipartUpload` names, joined, once each is there with its ETag.
/// Err: the XML API's error code and its details.
fn assemble(upload: &Upload, body: &str) -> Result<Vec<u8>, (&'static str, String)> {
    let (mut data, mut last) = (Vec::new(), 0u32);
    for part in elements(body, "Part") {
        let number = elements(part, "PartNumber")
            .first()
            .and_then(|n| n.trim().parse().ok());
        let etag = elements(part, "ETag")
            .first()
            .map(|e| e.replace("&quot;", "\""));
        let (Some(number), Some(etag)) = (number, etag) else {
            return Err(("MalformedXML", "a Part without PartNumber or ETag".into()));
        };
        if number <= last {
            return Err((
                "InvalidPartOrder",
                "parts must be in ascending order".into(),
            ));
        }
        last = number;
        match upload.parts.get(&number) {
            Some((e, bytes)) if e.trim_matches('"') == etag.trim().trim_matches('"') => {
                data.extend_from_slice(bytes)
            }
            _ => return Err(("InvalidPart", format!("part {number}"))),
        }
    }
    if last == 0 {
        return Err(("MalformedXML", "no parts".into()));
    }
    Ok(data)
}

fn complete(fx: &Fixture, req: &Req, bucket: &str, key: &str, id: &str) -> Response {
    let body = String::from_utf8_lossy(&req.body).into_owned();
    let assembled = {
        let s = fx.state.lock().unwrap();
        match s.gcs.uploads.get(id) {
            Some(u) if u.bucket == bucket && u.key == key => assemble(u, &body),
            _ => Err(("NoSuchUpload", id.to_string())),
        }
    };
    let data = match assembled {
        Ok(data) => data,
        Err((code, details)) => return fail(code, &details),
    };
    fx.state.lock().unwrap().gcs.uploads.remove(id);
    // A composed object has no MD5: its ETag is not one, its x-goog-hash is crc32c alone.
    let crc = crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, &data) as u32;
    let hash = format!("crc32c={}", BASE64_STANDARD.encode(crc.to_be_bytes()));
    let etag = format!("\"{crc:08x}-{}\"", elements(&body, "Part").len());
    match commit(fx, req, (bucket, key), data, hash, etag.clone()) {
        Err((code, details)) => fail(code, &details),
        Ok(generation) => {
            let (b, k) = (xml_escape(bucket), xml_escape(key));
            let location = format!("{}/storage.googleapis.com/{b}/{k}", xml_escape(&req.base()));
            xml(
                StatusCode::OK,
                format!(
                    "<CompleteMultipartUploadResult xmlns=\"{S3_NS}\"><Location>{location}</Location>\
                     <Bucket>{b}</Bucket><Key>{k}</Key><ETag>{}</ETag></CompleteMultipartUploadResult>",
                    xml_escape(&etag)
                ),
                &[("x-goog-generation", generation.to_string())],
            )
        }
    }
}

fn delete(fx: &Fixture, req: &Req, bucket: &str, key: &str) -> Response {
    let mut s = fx.state.lock().unwrap();
    let objects = s.gcs.buckets.get_mut(bucket).unwrap();
    let Some(o) = objects.get(key) else {
        return fail("NoSuchKey", &format!("No such object: {bucket}/{key}"));
    };
    let want = req.header("x-goog-if-generation-match");
    if want.is_some_and(|g| g.parse::<u64>().ok() != Some(o.generation)) {
        return fail("PreconditionFailed", "x-goog-if-generation-match");
    }
    objects.remove(key);
    StatusCode::NO_CONTENT.into_response()
}

fn get(fx: &Fixture, req: &Req, bucket: &str, key: &str) -> Response {
    let s = fx.state.lock().unwrap();
    let wanted = req.param("generation");
    let found = s.gcs.buckets[bucket].get(key);
    let Some(o) = found.filter(|o| wanted.is_none_or(|g| g == o.generation.to_string())) else {
        return fail("NoSuchKey", &format!("No such object: {bucket}/{key}"));
    };
    let (data, etag, size) = (o.data.clone(), o.etag.clone(), o.data.len());
    let headers = [
        ("etag", etag.clone()),
        (
            "last-modified",
            o.modified.format("%a, %d %b %Y %H:%M:%S GMT").to_string(),
        ),
        ("x-goog-generation", o.generation.to_string()),
        ("x-goog-metageneration", "1".to_string()),
        ("x-goog-hash", o.hash.clone()),
        ("x-goog-stored-content-length", size.to_string()),
        ("x-goog-stored-content-encoding", "identity".to_string()),
        ("x-goog-storage-class", "STANDARD".to_string()),
    ];
    drop(s);
    let tag_in = |list: &str| list.split(',').any(|t| t.trim() == etag || t.trim() == "*");
    let generation_match = req.header("x-goog-if-generation-match");
    if req.header("if-match").is_some_and(|l| !tag_in(l))
        || generation_match.is_some_and(|g| g != headers[2].1)
    {
        return fail(
            "PreconditionFailed",
            "If-Match or x-goog-if-generation-match",
        );
    }
    if req.header("if-none-match").is_some_and(tag_in) {
        return (StatusCode::NOT_MODIFIED, [("etag", etag)]).into_response();
    }
    let from = req
        .header("range")
        .and_then(|r| r.strip_prefix("bytes=")?.split('-').next());
    if from
        .and_then(|f| f.trim().parse::<usize>().ok())
        .is_some_and(|f| f >= size)
    {
        let mut r = fail("InvalidRange", &format!("bytes */{size}"));
        let all = format!("bytes */{size}").parse().unwrap();
        r.headers_mut().insert(header::CONTENT_RANGE, all);
        return r;
    }
    if req.method == Method::HEAD {
        let mut r = (StatusCode::OK, headers).into_response();
        let h = r.headers_mut();
        h.insert(header::CONTENT_LENGTH, size.into());
        h.insert(
            header::CONTENT_TYPE,
            "application/octet-stream".parse().unwrap(),
        );
        h.insert(header::ACCEPT_RANGES, "bytes".parse().unwrap());
        return r;
    }
    content_response(fx, req, data, &headers)
}

/// GET Bucket (list-type=2): keys after the continuation token (or start-after) under the
/// prefix, rolled up at the delimiter into CommonPrefixes.
fn list(fx: &Fixture, req: &Req, bucket: &str) -> Response {
    if req.param("list-type").as_deref() != Some("2") {
        return fail("NotImplemented", "this fixture lists with list-type=2 only");
    }
    let prefix = req.param("prefix").unwrap_or_default();
    let delimiter = req.param("delimiter").filter(|d| !d.is_empty());
    let max = req.param("max-keys").and_then(|m| m.parse().ok());
    let max = max.unwrap_or(1000usize).min(PAGE);
    let token = req.param("continuation-token").map(|t| {
        String::from_utf8(BASE64_URL_SAFE_NO_PAD.decode(t).unwrap_or_default()).unwrap_or_default()
    });
    let after = token.or(req.param("start-after")).unwrap_or_default();
    let s = fx.state.lock().unwrap();
    let (mut contents, mut prefixes, mut count) = (String::new(), String::new(), 0);
    let (mut last, mut truncated) = (String::new(), false);
    let range = (
        std::ops::Bound::Excluded(&after),
        std::ops::Bound::Unbounded,
    );
    for (k, o) in s.gcs.buckets[bucket].range::<String, _>(range) {
        let Some(tail) = k.strip_prefix(prefix.as_str()) else {
            continue;
        };
        let cut = delimiter
            .as_ref()
            .and_then(|d| tail.find(d.as_str()).map(|i| i + d.len()));
        let rolled = cut.map(|i| k[..prefix.len() + i].to_string());
        if rolled
            .as_ref()
            .is_some_and(|p| !last.is_empty() && last.starts_with(p.as_str()))
        {
            continue; // rolled up already on this page
        }
        if count == max {
            truncated = true;
            break;
        }
        count += 1;
        if let Some(p) = rolled {
            prefixes += &format!(
                "<CommonPrefixes><Prefix>{}</Prefix></CommonPrefixes>",
                xml_escape(&p)
            );
            last = format!("{p}\u{10FFFF}"); // the next page starts after every key under it
        } else {
            let modified = o
                .modified
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
            contents += &format!(
                "<Contents><Key>{}</Key><Generation>{}</Generation><MetaGeneration>1</MetaGeneration>\
                 <LastModified>{modified}</LastModified><ETag>{}</ETag><Size>{}</Size></Contents>",
                xml_escape(k),
                o.generation,
                xml_escape(&o.etag),
                o.data.len()
            );
            last = k.clone();
        }
    }
    let next = BASE64_URL_SAFE_NO_PAD.encode(&last);
    let next = if truncated {
        format!("<NextContinuationToken>{next}</NextContinuationToken>")
    } else {
        String::new()
    };
    xml(
        StatusCode::OK,
        format!(
            "<ListBucketResult xmlns=\"http://doc.s3.amazonaws.com/2006-03-01\"><Name>{}</Name>\
             <Prefix>{}</Prefix><KeyCount>{count}</KeyCount><MaxKeys>{max}</MaxKeys>\
             <IsTruncated>{truncated}</IsTruncated>{contents}{prefixes}{next}</ListBucketResult>",
            xml_escape(bucket),
            xml_escape(&prefix)
        ),
        &[],
    )
}
