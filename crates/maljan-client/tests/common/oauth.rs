//! The OAuth tests' peer (node-oidc-provider in front of an MCP resource server built from the
//! official TypeScript SDK: see oauth_peer.mjs), and a person at a browser who signs in through
//! the provider's own login and consent forms.

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader},
    path::Path,
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::Duration,
};

use maljan_client::{KeySource, OAuthConfig, ServerConfig, TransportKind, transport::oauth};
use serde_json::Value;

pub struct OAuthPeer {
    child: Child,
    pub issuer: String,
    /// The protected MCP endpoint.
    pub mcp: String,
    pub m2m_client_id: String,
    pub m2m_client_secret: String,
}

impl OAuthPeer {
    /// Starts the provider and the resource server; access tokens live `access_ttl` seconds.
    pub fn start(access_ttl: u64, log: &Path) -> Self {
        let node = maljan_testkit::peer_env("MALJAN_NODE");
        let provider = maljan_testkit::peer_env("MALJAN_OIDC_PROVIDER");
        assert!(
            Path::new(&provider).join("lib/index.js").exists(),
            "MALJAN_OIDC_PROVIDER={provider} holds no oidc-provider: run scripts/peers.sh (it installs oidc-provider 9.13.3 once)"
        );
        let sdk = Path::new(&maljan_testkit::peer_env("MALJAN_PEERS"))
            .join("node/node_modules/@modelcontextprotocol/sdk");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/common/oauth_peer.mjs");
        let mut child = Command::new(node)
            .arg(script)
            .env("MALJAN_OIDC_PROVIDER", &provider)
            .env("MCP_SDK", &sdk)
            .env("ACCESS_TTL", access_ttl.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(log).expect("peer log"))
            .spawn()
            .expect("start node with oauth_peer.mjs");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            // The provider prints notices too; the peer's own line is the JSON one.
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.starts_with('{') {
                    let _ = tx.send(line);
                }
            }
        });
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| {
                let _ = child.kill();
                panic!(
                    "the OAuth peer did not start; its log: {}",
                    std::fs::read_to_string(log).unwrap_or_default()
                )
            });
        let v: Value = serde_json::from_str(&line).expect("peer's JSON line");
        let s = |k: &str| v[k].as_str().expect(k).to_string();
        Self {
            issuer: s("issuer"),
            mcp: s("mcp"),
            m2m_client_id: s("m2m_client_id"),
            m2m_client_secret: s("m2m_client_secret"),
            child,
        }
    }

    /// What the provider and the resource server saw: grants by type, registrations, the tokens
    /// issued, the calls answered.
    pub async fn stats(&self) -> Value {
        let url = self.mcp.replace("/mcp", "/stats");
        let client = maljan_client::transport::http_client();
        client.get(url).send().await.unwrap().json().await.unwrap()
    }

    pub async fn grants(&self, kind: &str) -> u64 {
        self.stats().await["grants"][kind].as_u64().unwrap_or(0)
    }

    /// An `http` server entry for the protected endpoint.
    pub fn server(&self, oauth: OAuthConfig) -> ServerConfig {
        ServerConfig {
            transport: TransportKind::Http,
            url: self.mcp.clone(),
            oauth: Some(oauth),
            enabled: true,
            ..Default::default()
        }
    }
}

impl Drop for OAuthPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Signs in to `server` as `maljan servers login` does, with a person at the browser.
pub async fn login_as_a_person(url: &str, ctx: &oauth::OAuthContext) -> (oauth::LoginDone, String) {
    let (tx, rx) = tokio::sync::oneshot::channel::<String>();
    let person = tokio::spawn(async move {
        let address = rx.await.expect("the login showed an address");
        let page = browse(&address).await;
        (address, page)
    });
    let done = oauth::login(url, ctx, Duration::from_secs(60), move |address| {
        let _ = tx.send(address.to_string());
    })
    .await
    .expect("login");
    let (address, page) = person.await.unwrap();
    assert!(page.contains("Signed in"), "the browser ended on: {page}");
    (done, address)
}

/// A person's browser: follows redirects, keeps cookies, and submits each form the provider
/// shows (any login and password sign in to its development interactions; consent is a button).
/// Returns the last page, the one maljan's loopback listener answered.
pub async fn browse(start: &str) -> String {
    // reqwest is built without a TLS provider; maljan-client installs one with its first client.
    let _ = maljan_client::transport::http_client();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let mut cookies: BTreeMap<String, String> = BTreeMap::new();
    let mut url = reqwest::Url::parse(start).unwrap();
    let mut form: Option<Vec<(String, String)>> = None;
    for _ in 0..20 {
        let cookie = cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ");
        let request = match form.take() {
            Some(fields) => {
                let mut encoded = reqwest::Url::parse("http://form/").unwrap();
                encoded.query_pairs_mut().extend_pairs(&fields);
                client
                    .post(url.clone())
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body(encoded.query().unwrap_or("").to_string())
            }
            None => client.get(url.clone()),
        };
        let answer = request.header("cookie", cookie).send().await.unwrap();
        for v in answer.headers().get_all("set-cookie") {
            let pair = v.to_str().unwrap().split(';').next().unwrap();
            if let Some((k, v)) = pair.split_once('=') {
                cookies.insert(k.trim().to_string(), v.to_string());
            }
        }
        if answer.status().is_redirection() {
            let to = answer.headers()["location"].to_str().unwrap();
            url = url.join(to).unwrap();
            continue;
        }
        let page = answer.text().await.unwrap();
        match parse_form(&page) {
            Some((action, fields)) => {
                url = url.join(&action).unwrap();
                form = Some(fields);
            }
            None => return page,
        }
    }
    panic!("the sign-in did not end within 20 pages");
}

fn attr(tag: &str, name: &str) -> Option<String> {
    let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let end = tag[at..].find('"')?;
    Some(tag[at..at + end].replace("&amp;", "&"))
}

/// The page's form: its action and its fields, with a login and password filled in.
fn parse_form(page: &str) -> Option<(String, Vec<(String, String)>)> {
    let start = page.find("<form")?;
    let end = page[start..].find("</form>")? + start;
    let body = &page[start..end];
    let action = attr(&body[..body.find('>')?], "action")?;
    let mut fields = Vec::new();
    for input in body.split("<input").skip(1) {
        let tag = &input[..input.find('>').unwrap_or(input.len())];
        let Some(name) = attr(tag, "name") else {
            continue;
        };
        let value = attr(tag, "value").unwrap_or_else(|| match name.as_str() {
            "login" => "analyst".into(),
            "password" => "any password".into(),
            _ => String::new(),
        });
        fields.push((name, value));
    }
    Some((action, fields))
}

/// The context a runtime would build for `server` under `data_dir`.
pub fn context(server: &str, cfg: &ServerConfig, data_dir: &Path) -> oauth::OAuthContext {
    oauth::OAuthContext::new(
        server,
        cfg.oauth.clone().expect("an oauth table"),
        KeySource::in_dir(data_dir),
        data_dir,
    )
}
