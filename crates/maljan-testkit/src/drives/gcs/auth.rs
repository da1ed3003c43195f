//! Who may call the GCS fixture: the one service account it was given (`--gcs-key`), by a bearer
//! self-signed JWT (RS256, `iss` = `sub` = its client_email, unexpired, a storage scope or the
//! storage audience) or a V4 signed URL (`X-Goog-Signature`: GOOG4-RSA-SHA256 over the canonical
//! request, unexpired), both signatures verified with the account's public key, as Google does.

use base64::{
    Engine,
    prelude::{BASE64_STANDARD, BASE64_URL_SAFE_NO_PAD},
};
use chrono::{NaiveDateTime, Utc};
use serde_json::Value;

use super::super::{Fixture, Req};

/// The service account requests are signed by.
pub(crate) struct Account {
    email: String,
    key_id: String,
    /// The RSAPublicKey DER of the account's key.
    public: Vec<u8>,
}

impl Account {
    /// From a service-account JSON key (`client_email`, `private_key_id`, a PKCS#8 `private_key`).
    pub(crate) fn from_key(json_key: &str) -> Result<Self, String> {
        let v: Value = serde_json::from_str(json_key).map_err(|e| format!("the key: {e}"))?;
        let field = |k: &str| v[k].as_str().map(str::to_string).ok_or(format!("no {k}"));
        let pem = field("private_key")?;
        let b64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        let der = BASE64_STANDARD
            .decode(b64.trim())
            .map_err(|e| e.to_string())?;
        let pair = ring::rsa::KeyPair::from_pkcs8(&der).map_err(|e| e.to_string())?;
        Ok(Self {
            email: field("client_email")?,
            key_id: field("private_key_id")?,
            public: pair.public().as_ref().to_vec(),
        })
    }

    fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        let key = ring::signature::UnparsedPublicKey::new(
            &ring::signature::RSA_PKCS1_2048_8192_SHA256,
            &self.public,
        );
        key.verify(message, signature).is_ok()
    }
}

/// Why the request is not signed by the fixture's service account (None: it is).
pub(super) fn refused(fx: &Fixture, req: &Req) -> Option<(&'static str, &'static str)> {
    let s = fx.state.lock().unwrap();
    let Some(account) = &s.gcs.account else {
        return Some(("AuthenticationRequired", "started without --gcs-key"));
    };
    if req.param("X-Goog-Signature").is_some() {
        return signed_url(account, req).err();
    }
    let jwt = req
        .header("authorization")
        .and_then(|v| v.strip_prefix("Bearer "));
    bearer(account, jwt.unwrap_or_default())
        .err()
        .map(|why| ("AuthenticationRequired", why))
}

/// A self-signed JWT as Google accepts one from a service account.
fn bearer(account: &Account, jwt: &str) -> Result<(), &'static str> {
    let mut parts = jwt.split('.');
    let (Some(h), Some(c), Some(sig), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("the bearer token is not a JWT");
    };
    let decode = |p: &str| -> Option<Value> {
        serde_json::from_slice(&BASE64_URL_SAFE_NO_PAD.decode(p).ok()?).ok()
    };
    let (Some(head), Some(claims)) = (decode(h), decode(c)) else {
        return Err("the JWT does not decode");
    };
    let sig = BASE64_URL_SAFE_NO_PAD.decode(sig).unwrap_or_default();
    if head["alg"] != "RS256" || !account.verifies(format!("{h}.{c}").as_bytes(), &sig) {
        return Err("the JWT's signature is not the service account's");
    }
    if head
        .get("kid")
        .is_some_and(|k| k != account.key_id.as_str())
        || claims["iss"] != account.email.as_str()
        || claims["sub"] != account.email.as_str()
    {
        return Err("the JWT's kid, iss or sub is not the service account's");
    }
    let now = Utc::now().timestamp();
    if claims["exp"].as_i64().is_none_or(|e| e <= now)
        || claims["iat"].as_i64().is_none_or(|i| i > now + 300)
    {
        return Err("the JWT has expired (or is not yet valid)");
    }
    let scoped = claims["scope"].as_str().is_some_and(|s| {
        s.split(' ').any(|s| {
            s == "https://www.googleapis.com/auth/cloud-platform"
                || s.starts_with("https://www.googleapis.com/auth/devstorage.")
        })
    });
    if !scoped && claims["aud"] != "https://storage.googleapis.com/" {
        return Err("the JWT names neither a storage scope nor the storage audience");
    }
    Ok(())
}

/// A V4 signed URL: the canonical request rebuilt from what arrived, its signature checked.
fn signed_url(account: &Account, req: &Req) -> Result<(), (&'static str, &'static str)> {
    let bad = ("SignatureDoesNotMatch", "the signature does not match");
    let p = |k: &str| req.param(k).unwrap_or_default();
    let credential = p("X-Goog-Credential");
    let (email, scope) = credential.split_once('/').ok_or(bad)?;
    if p("X-Goog-Algorithm") != "GOOG4-RSA-SHA256" || email != account.email {
        return Err(bad);
    }
    let date = NaiveDateTime::parse_from_str(&p("X-Goog-Date"), "%Y%m%dT%H%M%SZ");
    let expires: i64 = p("X-Goog-Expires").parse().map_err(|_| bad)?;
    if Utc::now().timestamp() > date.map_err(|_| bad)?.and_utc().timestamp() + expires {
        return Err(("ExpiredToken", "the signed URL has expired"));
    }
    let mut query: Vec<&str> = (req.query.split('&'))
        .filter(|kv| !kv.is_empty() && !kv.starts_with("X-Goog-Signature="))
        .collect();
    query.sort();
    let signed = p("X-Goog-SignedHeaders");
    let headers: String = (signed.split(';'))
        .map(|h| format!("{h}:{}\n", req.header(h).unwrap_or_default().trim()))
        .collect();
    let payload = req
        .header("x-goog-content-sha256")
        .unwrap_or("UNSIGNED-PAYLOAD");
    let canonical = format!(
        "{}\n{}\n{}\n{headers}\n{signed}\n{payload}",
        req.method,
        req.path,
        query.join("&")
    );
    let hashed = super::super::sha256_hex(canonical.as_bytes());
    let to_sign = format!("GOOG4-RSA-SHA256\n{}\n{scope}\n{hashed}", p("X-Goog-Date"));
    let sig = hex::decode(p("X-Goog-Signature")).map_err(|_| bad)?;
    account
        .verifies(to_sign.as_bytes(), &sig)
        .then_some(())
        .ok_or(bad)
}
