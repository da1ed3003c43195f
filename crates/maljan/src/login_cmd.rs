//! `maljan servers login NAME`: signs in to an OAuth 2.1 server once (maljan-client's
//! `transport::oauth` does the work). Prints the address to open, never a token or a secret.

use std::{process::ExitCode, time::Duration};

use anyhow::{Context, bail};
use clap::Args;
use maljan_client::{
    Config, KeySource, OAuthConfig, OAuthGrant, secrets,
    transport::oauth::{self, OAuthContext},
};

use crate::{client_cmds::ConfigArg, show::visible};

#[derive(Args)]
pub struct LoginArgs {
    pub name: String,
    #[command(flatten)]
    pub config: ConfigArg,
    /// Use this pre-registered client id (saved in the server's oauth table); without one the
    /// client registers itself (RFC 7591).
    #[arg(long)]
    pub client_id: Option<String>,
    /// Ask for this scope (repeatable; saved); default: what the server names.
    #[arg(long = "scope", value_name = "SCOPE")]
    pub scopes: Vec<String>,
    /// Machine to machine: the client-credentials grant (needs --client-id once; the client
    /// secret is read from stdin or a prompt and stored sealed).
    #[arg(long)]
    pub client_credentials: bool,
    /// Read a new client secret even if one is stored.
    #[arg(long)]
    pub new_secret: bool,
    /// The loopback port for the browser's redirect (saved; default: any free port).
    #[arg(long)]
    pub port: Option<u16>,
    /// How long to wait for the browser's sign-in.
    #[arg(long, default_value_t = 300)]
    pub wait_seconds: u64,
    /// Forget the stored tokens instead.
    #[arg(long)]
    pub logout: bool,
}

pub async fn login(a: LoginArgs) -> anyhow::Result<ExitCode> {
    let mut c = Config::load_for_edit(a.config.config.as_deref())?;
    let keys = KeySource::in_dir(&c.data_dir);
    let file = oauth::credentials_file(&c.data_dir, &a.name);
    let Some(entry) = c.servers.get_mut(&a.name) else {
        bail!("no server named '{}' in {}", a.name, c.path.display());
    };
    if a.logout {
        match std::fs::remove_file(&file) {
            Ok(()) => println!("forgot the OAuth tokens of '{}'", a.name),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                println!("'{}' had no stored OAuth tokens", a.name)
            }
            Err(e) => bail!("cannot remove {}: {e}", file.display()),
        }
        return Ok(ExitCode::SUCCESS);
    }
    if !entry.transport.is_http() {
        bail!("'{}' is a stdio server: OAuth is for HTTP servers", a.name);
    }
    if !entry.auth_token.is_empty() {
        bail!(
            "'{}' has a fixed auth_token; remove it first (maljan servers set-token {} --clear)",
            a.name,
            a.name
        );
    }
    let before = entry.oauth.clone();
    let o = entry.oauth.get_or_insert_with(OAuthConfig::default);
    if a.client_credentials {
        o.grant = OAuthGrant::ClientCredentials;
    }
    if let Some(id) = a.client_id {
        o.client_id = id;
    }
    if !a.scopes.is_empty() {
        o.scopes = a.scopes;
    }
    if let Some(port) = a.port {
        o.redirect_port = port;
    }
    if o.grant == OAuthGrant::ClientCredentials {
        if o.client_id.is_empty() {
            bail!("the client-credentials grant needs the client's id: --client-id ID");
        }
        if o.client_secret.is_empty() || a.new_secret {
            let secret =
                secrets::read_secret_line(&format!("client secret of '{}': ", o.client_id))?;
            if secret.is_empty() {
                bail!("no client secret given (it is read from stdin or the prompt)");
            }
            o.client_secret = keys.seal(&secret)?;
        }
    }
    let ctx = OAuthContext::new(&a.name, o.clone(), keys, &c.data_dir);
    let url = entry.url.clone();
    if entry.oauth != before {
        c.save()?;
    }
    let wait = Duration::from_secs(a.wait_seconds.max(1));
    // The address, the client id and the scopes come from the server's metadata.
    let done = oauth::login(&url, &ctx, wait, |address| {
        println!(
            "Open this address in a browser to sign in to '{}' (waiting up to {} s):\n\n  {}\n",
            a.name,
            wait.as_secs(),
            visible(address)
        );
    })
    .await
    .map_err(anyhow::Error::msg)
    .with_context(|| format!("signing in to '{}'", a.name))?;
    let scopes = if done.scopes.is_empty() {
        "none named".to_string()
    } else {
        visible(&done.scopes.join(" ")).into_owned()
    };
    println!(
        "signed in to '{}' ({}; client {}; scopes: {scopes}); tokens sealed (enc:v1) in {}",
        a.name,
        done.grant.as_str(),
        visible(&done.client_id),
        done.file.display()
    );
    match (done.grant, done.refreshable) {
        (OAuthGrant::ClientCredentials, _) => {
            println!("a new token is minted whenever the held one is about to expire")
        }
        (_, true) => println!("the token is refreshed without you while the server allows"),
        (_, false) => println!(
            "the server gave no refresh token: sign in again when it expires{}",
            done.expires_in
                .map(|s| format!(" (in {s} s)"))
                .unwrap_or_default()
        ),
    }
    Ok(ExitCode::SUCCESS)
}
