//! The operator's storage profiles: one TOML table per backend and profile name, read once at
//! start-up (`maljan serve files --storage-config FILE`), so a model never needs to see a secret.
//!
//! ```toml
//! max_object_bytes = 10737418240      # optional: the largest object one call moves (10 GiB)
//! [s3.default]
//! endpoint_url = "http://127.0.0.1:9000"   # optional: MinIO and other S3-compatible stores
//! region = "us-east-1"
//! access_key_id = "AKIA..."
//! secret_access_key_file = "/etc/maljan/s3.secret"   # or secret_access_key, or secret_access_key_env
//! allow_private_endpoint = true              # the operator's choice, never a tool argument's
//! [azure_blob.default]
//! account = "devstoreaccount1"
//! access_key_env = "AZURE_STORAGE_KEY"       # or a connection_string (inline, _file or _env)
//! [gcs.default]
//! service_account_key_file = "/etc/maljan/gcs.json"
//! ```
//!
//! Every secret field `X` may be given as `X` (inline), `X_file` (a file holding it, relative to
//! the config file's directory; one trailing newline is dropped) or `X_env` (an environment
//! variable's name), at most one of the three. Secrets are held as [`Secret`], whose `Debug`
//! never shows them. An unknown key is an error, so a misspelt one is not silently ignored.

use std::{collections::BTreeMap, fmt, path::Path};

/// A credential. Its `Debug` and `Display` show nothing of it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// How long one request may take and how often a failed one is retried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Network {
    /// Lets the endpoint be a loopback, private, link-local or reserved address.
    pub allow_private_endpoint: bool,
    pub max_retries: usize,
    /// Seconds to connect, and to wait for each read.
    pub timeout_s: u64,
}

impl Default for Network {
    fn default() -> Self {
        Self {
            allow_private_endpoint: false,
            max_retries: 3,
            timeout_s: 30,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct S3Profile {
    pub endpoint_url: Option<String>,
    pub region: Option<String>,
    pub access_key_id: Option<Secret>,
    pub secret_access_key: Option<Secret>,
    pub session_token: Option<Secret>,
    /// Unsigned requests (public buckets); otherwise both keys are required.
    pub anonymous: bool,
    /// `bucket.host` rather than `host/bucket` (AWS's default; off for S3-compatible stores).
    pub virtual_hosted_style: Option<bool>,
    pub network: Network,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AzureProfile {
    pub account: Option<String>,
    pub access_key: Option<Secret>,
    pub sas_token: Option<Secret>,
    /// The blob service URL (`https://ACCOUNT.blob.core.windows.net` unless given).
    pub account_url: Option<String>,
    pub network: Network,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcsProfile {
    /// A service account's JSON key.
    pub service_account_key: Option<Secret>,
    /// Another endpoint than Google's (an emulator, a proxy the operator runs).
    pub base_url: Option<String>,
    pub anonymous: bool,
    pub network: Network,
}

/// Every profile the operator configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageConfig {
    pub s3: BTreeMap<String, S3Profile>,
    pub azure_blob: BTreeMap<String, AzureProfile>,
    pub gcs: BTreeMap<String, GcsProfile>,
    /// `[dropbox.NAME]`, `[onedrive.NAME]`, `[box.NAME]`, `[drive.NAME]` (crate::drives).
    pub drives: crate::drives::DriveProfiles,
    pub sftp: BTreeMap<String, super::remote_profiles::SftpProfile>,
    pub ftp: BTreeMap<String, super::remote_profiles::FtpProfile>,
    pub webdav: BTreeMap<String, super::remote_profiles::WebdavProfile>,
    /// The largest object one call uploads or downloads.
    pub max_object_bytes: u64,
}

pub const DEFAULT_MAX_OBJECT_BYTES: u64 = 10 << 30;

impl Default for StorageConfig {
    fn default() -> Self {
        Self {
            s3: BTreeMap::new(),
            azure_blob: BTreeMap::new(),
            gcs: BTreeMap::new(),
            drives: Default::default(),
            sftp: BTreeMap::new(),
            ftp: BTreeMap::new(),
            webdav: BTreeMap::new(),
            max_object_bytes: DEFAULT_MAX_OBJECT_BYTES,
        }
    }
}

impl StorageConfig {
    /// Reads the file; `_file` secrets are relative to its directory. The error names the key at
    /// fault, never a value.
    pub fn load(path: &Path) -> Result<Self, String> {
        load_config(path, Self::parse)
    }

    /// Parses a config's text; `env` looks up the `_env` secrets.
    pub fn parse(
        text: &str,
        base: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, String> {
        let mut top = Fields::new(toml_table(text)?, String::new(), base, env);
        let mut config = StorageConfig {
            max_object_bytes: top
                .int("max_object_bytes")?
                .unwrap_or(DEFAULT_MAX_OBJECT_BYTES),
            ..Default::default()
        };
        if config.max_object_bytes == 0 {
            return Err("max_object_bytes must be positive".into());
        }
        for (name, mut f) in top.profiles("s3")? {
            let profile = S3Profile {
                endpoint_url: f.url("endpoint_url")?,
                region: f.string("region")?,
                access_key_id: f.secret("access_key_id")?,
                secret_access_key: f.secret("secret_access_key")?,
                session_token: f.secret("session_token")?,
                anonymous: f.bool("anonymous")?.unwrap_or(false),
                virtual_hosted_style: f.bool("virtual_hosted_style")?,
                network: f.network()?,
            };
            f.finish()?;
            if !profile.anonymous
                && (profile.access_key_id.is_none() != profile.secret_access_key.is_none())
            {
                return Err(format!(
                    "[s3.{name}] needs both access_key_id and secret_access_key (or neither, with anonymous = true)"
                ));
            }
            config.s3.insert(name, profile);
        }
        for (name, mut f) in top.profiles("azure_blob")? {
            let mut profile = AzureProfile {
                account: f.string("account")?,
                access_key: f.secret("access_key")?,
                sas_token: f.secret("sas_token")?,
                account_url: f.url("account_url")?,
                network: Network::default(),
            };
            if let Some(cs) = f.secret("connection_string")? {
                let parsed = parse_connection_string(cs.expose())
                    .map_err(|e| format!("[azure_blob.{name}] connection_string: {e}"))?;
                profile = parsed.merged_into(profile);
            }
            profile.network = f.network()?;
            f.finish()?;
            config.azure_blob.insert(name, profile);
        }
        for (name, mut f) in top.profiles("gcs")? {
            let profile = GcsProfile {
                service_account_key: f.secret("service_account_key")?,
                base_url: f.url("base_url")?,
                anonymous: f.bool("anonymous")?.unwrap_or(false),
                network: f.network()?,
            };
            f.finish()?;
            config.gcs.insert(name, profile);
        }
        config.drives = crate::drives::DriveProfiles::parse(&mut top)?;
        super::remote_profiles::parse(&mut top, &mut config)?;
        top.finish()?;
        Ok(config)
    }
}

/// An Azure connection string's parts (`AccountName=…;AccountKey=…;BlobEndpoint=…`).
#[derive(Default)]
pub(crate) struct ConnectionString {
    account: Option<String>,
    key: Option<Secret>,
    sas: Option<Secret>,
    blob_endpoint: Option<String>,
    protocol: Option<String>,
    suffix: Option<String>,
}

impl ConnectionString {
    /// Fills `profile` from the string; what the string does not say stays as it was.
    pub(crate) fn merged_into(self, mut profile: AzureProfile) -> AzureProfile {
        if self.account.is_some() {
            profile.account = self.account;
        }
        if self.key.is_some() {
            profile.access_key = self.key;
        }
        if self.sas.is_some() {
            profile.sas_token = self.sas;
        }
        if let Some(endpoint) = self.blob_endpoint {
            profile.account_url = Some(endpoint);
        } else if let (Some(account), Some(suffix)) = (&profile.account, &self.suffix) {
            let protocol = self.protocol.as_deref().unwrap_or("https");
            profile.account_url = Some(format!("{protocol}://{account}.blob.{suffix}"));
        }
        profile
    }
}

/// Parses `Key=Value;Key=Value`. Errors name keys, never values.
pub(crate) fn parse_connection_string(s: &str) -> Result<ConnectionString, String> {
    let mut out = ConnectionString::default();
    for part in s.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = part
            .split_once('=')
            .ok_or_else(|| "each part must be Key=Value".to_string())?;
        match key {
            "AccountName" => out.account = Some(value.to_string()),
            "AccountKey" => out.key = Some(Secret::new(value)),
            "SharedAccessSignature" => out.sas = Some(Secret::new(value)),
            "BlobEndpoint" => out.blob_endpoint = Some(value.to_string()),
            "DefaultEndpointsProtocol" => out.protocol = Some(value.to_string()),
            "EndpointSuffix" => out.suffix = Some(value.to_string()),
            // The other services' endpoints mean nothing to blob storage.
            "QueueEndpoint" | "TableEndpoint" | "FileEndpoint" => {}
            other => return Err(format!("unknown key {other:?}")),
        }
    }
    if out.account.is_none() && out.blob_endpoint.is_none() {
        return Err("needs AccountName or BlobEndpoint".into());
    }
    Ok(out)
}

/// One TOML table being read: each key taken once, the leftovers an error.
/// Reads an operator's config file with `parse`: `_file` secrets are relative to its directory,
/// `_env` ones come from the environment, and the error names the file.
pub(crate) fn load_config<T>(
    path: &Path,
    parse: impl FnOnce(&str, &Path, &dyn Fn(&str) -> Option<String>) -> Result<T, String>,
) -> Result<T, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let base = path.parent().unwrap_or(Path::new("."));
    parse(&text, base, &|name| std::env::var(name).ok())
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// Parses TOML without quoting it back: the parser's message shows the offending line, which
/// may hold a secret.
pub(crate) fn toml_table(text: &str) -> Result<toml::Table, String> {
    text.parse().map_err(|e: toml::de::Error| match e.span() {
        Some(span) => format!("not valid TOML (at byte {}): {}", span.start, e.message()),
        None => format!("not valid TOML: {}", e.message()),
    })
}

pub(crate) struct Fields<'a> {
    table: toml::Table,
    at: String,
    base: &'a Path,
    env: &'a dyn Fn(&str) -> Option<String>,
}

impl<'a> Fields<'a> {
    pub(crate) fn new(
        table: toml::Table,
        at: String,
        base: &'a Path,
        env: &'a dyn Fn(&str) -> Option<String>,
    ) -> Self {
        Self {
            table,
            at,
            base,
            env,
        }
    }

    pub(crate) fn base(&self) -> &Path {
        self.base
    }

    pub(crate) fn name(&self, key: &str) -> String {
        if self.at.is_empty() {
            key.to_string()
        } else {
            format!("[{}] {key}", self.at)
        }
    }

    /// `[backend.NAME]` tables, each as its own `Fields`.
    pub(crate) fn profiles(&mut self, backend: &str) -> Result<Vec<(String, Fields<'a>)>, String> {
        let Some(value) = self.table.remove(backend) else {
            return Ok(Vec::new());
        };
        let toml::Value::Table(profiles) = value else {
            return Err(format!(
                "{backend} must hold tables such as [{backend}.default]"
            ));
        };
        let mut out = Vec::new();
        for (name, value) in profiles {
            let toml::Value::Table(t) = value else {
                return Err(format!(
                    "{backend}.{name} must be a table ([{backend}.{name}])"
                ));
            };
            let at = format!("{backend}.{name}");
            out.push((name, Fields::new(t, at, self.base, self.env)));
        }
        Ok(out)
    }

    pub(crate) fn string(&mut self, key: &str) -> Result<Option<String>, String> {
        match self.table.remove(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(format!("{} must be a string", self.name(key))),
        }
    }

    pub(crate) fn url(&mut self, key: &str) -> Result<Option<String>, String> {
        let Some(s) = self.string(key)? else {
            return Ok(None);
        };
        let url =
            url::Url::parse(&s).map_err(|e| format!("{} is not a URL: {e}", self.name(key)))?;
        if url.scheme() != "http" && url.scheme() != "https" {
            return Err(format!("{} must be an http or https URL", self.name(key)));
        }
        Ok(Some(s))
    }

    /// A list of strings (a lone string reads as a list of one).
    pub(crate) fn strings(&mut self, key: &str) -> Result<Option<Vec<String>>, String> {
        match self.table.remove(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(vec![s])),
            Some(toml::Value::Array(items)) => items
                .into_iter()
                .map(|v| match v {
                    toml::Value::String(s) => Ok(s),
                    _ => Err(format!("{} must be a list of strings", self.name(key))),
                })
                .collect::<Result<_, _>>()
                .map(Some),
            Some(_) => Err(format!("{} must be a list of strings", self.name(key))),
        }
    }

    /// A number (integer or float), 0 or more.
    pub(crate) fn seconds(&mut self, key: &str) -> Result<Option<f64>, String> {
        match self.table.remove(key) {
            None => Ok(None),
            Some(toml::Value::Integer(i)) if i >= 0 => Ok(Some(i as f64)),
            Some(toml::Value::Float(f)) if f.is_finite() && f >= 0.0 => Ok(Some(f)),
            Some(_) => Err(format!("{} must be a number, 0 or more", self.name(key))),
        }
    }

    pub(crate) fn bool(&mut self, key: &str) -> Result<Option<bool>, String> {
        match self.table.remove(key) {
            None => Ok(None),
            Some(toml::Value::Boolean(b)) => Ok(Some(b)),
            Some(_) => Err(format!("{} must be true or false", self.name(key))),
        }
    }

    pub(crate) fn int(&mut self, key: &str) -> Result<Option<u64>, String> {
        match self.table.remove(key) {
            None => Ok(None),
            Some(toml::Value::Integer(i)) if i >= 0 => Ok(Some(i as u64)),
            Some(_) => Err(format!("{} must be a non-negative integer", self.name(key))),
        }
    }

    pub(crate) fn network(&mut self) -> Result<Network, String> {
        let d = Network::default();
        let net = Network {
            allow_private_endpoint: self.bool("allow_private_endpoint")?.unwrap_or(false),
            max_retries: self
                .int("max_retries")?
                .map_or(d.max_retries, |n| n as usize),
            timeout_s: self.int("timeout_s")?.unwrap_or(d.timeout_s),
        };
        if net.timeout_s == 0 || net.timeout_s > 3600 {
            return Err(format!(
                "{} must be between 1 and 3600",
                self.name("timeout_s")
            ));
        }
        if net.max_retries > 20 {
            return Err(format!("{} must be at most 20", self.name("max_retries")));
        }
        Ok(net)
    }

    /// `key`, `key_file` or `key_env`: at most one.
    pub(crate) fn secret(&mut self, key: &str) -> Result<Option<Secret>, String> {
        let inline = self.string(key)?;
        let file = self.string(&format!("{key}_file"))?;
        let var = self.string(&format!("{key}_env"))?;
        let given = [inline.is_some(), file.is_some(), var.is_some()];
        if given.iter().filter(|g| **g).count() > 1 {
            return Err(format!(
                "{} is given more than once (choose one of {key}, {key}_file, {key}_env)",
                self.name(key)
            ));
        }
        if let Some(v) = inline {
            return Ok(Some(Secret(v)));
        }
        if let Some(f) = file {
            let path = self.base.join(f);
            let mut text = std::fs::read_to_string(&path).map_err(|e| {
                format!(
                    "{}_file: cannot read {}: {e}",
                    self.name(key),
                    path.display()
                )
            })?;
            if text.ends_with('\n') {
                text.pop();
                if text.ends_with('\r') {
                    text.pop();
                }
            }
            return Ok(Some(Secret(text)));
        }
        if let Some(name) = var {
            let value = (self.env)(&name).ok_or_else(|| {
                format!(
                    "{}_env: the environment variable {name} is not set",
                    self.name(key)
                )
            })?;
            return Ok(Some(Secret(value)));
        }
        Ok(None)
    }

    pub(crate) fn finish(self) -> Result<(), String> {
        match self.table.keys().next() {
            None => Ok(()),
            Some(k) => Err(format!("unknown key {}", self.name(k))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<StorageConfig, String> {
        let env = |name: &str| (name == "S3_SECRET").then(|| "from-env".to_string());
        StorageConfig::parse(text, Path::new("/nonexistent"), &env)
    }

    #[test]
    fn profiles_and_secret_sources() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("s3.secret"), "from-file\n").unwrap();
        let text = r#"
            max_object_bytes = 1024
            [s3.default]
            endpoint_url = "http://127.0.0.1:9000"
            region = "us-east-1"
            access_key_id = "AKIA"
            secret_access_key_file = "s3.secret"
            allow_private_endpoint = true
            [s3.other]
            access_key_id = "K"
            secret_access_key_env = "S3_SECRET"
            [azure_blob.default]
            connection_string = "DefaultEndpointsProtocol=http;AccountName=dev;AccountKey=a2V5;BlobEndpoint=http://127.0.0.1:10000/dev;"
            [gcs.default]
            anonymous = true
        "#;
        let env = |name: &str| (name == "S3_SECRET").then(|| "from-env".to_string());
        let c = StorageConfig::parse(text, dir.path(), &env).unwrap();
        assert_eq!(c.max_object_bytes, 1024);
        let s3 = &c.s3["default"];
        assert_eq!(s3.secret_access_key, Some(Secret::new("from-file")));
        assert!(s3.network.allow_private_endpoint);
        let other = &c.s3["other"];
        assert_eq!(other.secret_access_key, Some(Secret::new("from-env")));
        assert!(!other.network.allow_private_endpoint);
        let az = &c.azure_blob["default"];
        assert_eq!(az.account.as_deref(), Some("dev"));
        assert_eq!(az.access_key, Some(Secret::new("a2V5")));
        assert_eq!(
            az.account_url.as_deref(),
            Some("http://127.0.0.1:10000/dev")
        );
        assert!(c.gcs["default"].anonymous);
    }

    #[test]
    fn secrets_never_show_in_debug_or_errors() {
        let c = parse(
            "[s3.default]\naccess_key_id = \"AKIASECRET\"\nsecret_access_key = \"TOPSECRET\"\n",
        )
        .unwrap();
        let shown = format!("{c:?}");
        assert!(
            !shown.contains("TOPSECRET") && !shown.contains("AKIASECRET"),
            "{shown}"
        );
        // A syntax error on a line holding a secret does not quote the line.
        let e = parse("[s3.default]\nsecret_access_key = \"TOPSECRET\n").unwrap_err();
        assert!(!e.contains("TOPSECRET"), "{e}");
        let e =
            parse("[azure_blob.default]\nconnection_string = \"AccountKey=TOPSECRET;Bogus=1\"\n")
                .unwrap_err();
        assert!(!e.contains("TOPSECRET"), "{e}");
    }

    #[test]
    fn mistakes_are_named() {
        let cases = [
            ("[s3.default]\nregion = 1\n", "region must be a string"),
            (
                "[s3.default]\nendpont_url = \"x\"\n",
                "unknown key [s3.default] endpont_url",
            ),
            (
                "[s3.default]\nendpoint_url = \"ftp://x\"\n",
                "http or https",
            ),
            ("[s3.default]\naccess_key_id = \"a\"\n", "needs both"),
            (
                "[s3.default]\nsecret_access_key = \"a\"\nsecret_access_key_env = \"S3_SECRET\"\naccess_key_id = \"k\"\n",
                "more than once",
            ),
            (
                "[s3.default]\naccess_key_id = \"a\"\nsecret_access_key_env = \"NOPE\"\n",
                "NOPE is not set",
            ),
            ("s3 = 1\n", "must hold tables"),
            ("[s3]\ndefault = 1\n", "must be a table"),
            ("bogus = 1\n", "unknown key bogus"),
            ("[s3.default]\ntimeout_s = 0\n", "between 1 and 3600"),
            ("max_object_bytes = 0\n", "positive"),
        ];
        for (text, want) in cases {
            let e = parse(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_text_is_an_answer_never_a_panic(text in ".{0,200}") {
            let _ = parse(&text);
            let _ = parse_connection_string(&text);
        }
    }
}
