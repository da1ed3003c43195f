//! The HTTP client every object store request goes through, under FA_download_file's SSRF policy:
//! each name is resolved by a resolver that refuses the whole name if any of its addresses is
//! loopback, private, link-local or reserved (the connection then goes to a checked address, so
//! no rebinding), a request to an address literal is checked before it is sent (this also keeps
//! cloud metadata services such as 169.254.169.254 out of reach), proxies are never used (a proxy
//! resolves names itself) and redirects are never followed. Only the operator's profile, with
//! `allow_private_endpoint = true`, lifts the address check; nothing a tool argument says can.

use std::{net::IpAddr, sync::Arc, time::Duration};

use object_store::client::{
    ClientOptions, HttpClient, HttpConnector, HttpError, HttpErrorKind, HttpRequest, HttpResponse,
    HttpService,
};
use url::Url;

use crate::download::{allowed, parse_numeric_v4};
use maljan_server::ToolError;

use super::profiles::Network;

/// Builds the guarded client for one profile.
#[derive(Debug, Clone)]
pub(crate) struct GuardedConnector {
    pub(crate) allow_private: bool,
    pub(crate) timeout: Duration,
}

impl GuardedConnector {
    pub(crate) fn new(net: &Network) -> Self {
        Self {
            allow_private: net.allow_private_endpoint,
            timeout: Duration::from_secs(net.timeout_s),
        }
    }
}

/// The address a host names by itself (an IP literal, or a numeric spelling such as `2130706433`).
fn literal(host: &str) -> Option<IpAddr> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.parse::<IpAddr>()
        .ok()
        .or_else(|| parse_numeric_v4(bare).map(IpAddr::V4))
}

fn refusal(host: &str, ip: IpAddr) -> String {
    format!(
        "the endpoint {host} is {ip}, a loopback, private, link-local or reserved address; \
         only a storage profile with allow_private_endpoint = true may reach one"
    )
}

/// Checks a profile's endpoint before any request: a clear refusal rather than a failed
/// connection. Names are checked again on every connection by the resolver.
pub(crate) fn check_endpoint(endpoint: &str, net: &Network) -> Result<(), ToolError> {
    let url = Url::parse(endpoint).map_err(|e| {
        ToolError::not_configured(format!("the profile's endpoint is not a URL: {e}"))
    })?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(ToolError::not_configured(
            "the profile's endpoint must be an http or https URL",
        ));
    }
    let host = url.host_str().unwrap_or_default();
    if !net.allow_private_endpoint
        && let Some(ip) = literal(host)
        && !allowed(ip, false)
    {
        return Err(ToolError::bad_argument(refusal(host, ip)).with_remediation(
            "point the profile at a public endpoint, or (the operator's choice) set \
             allow_private_endpoint = true in its table of the storage config",
        ));
    }
    Ok(())
}

#[derive(Debug)]
struct Refused(String);
impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for Refused {}

/// Resolves a name and refuses it whole when any address is not public.
struct CheckingResolver;

impl reqwest::dns::Resolve for CheckingResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addrs: Vec<std::net::SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if let Some(bad) = addrs.iter().find(|a| !allowed(a.ip(), false)) {
                return Err(Box::new(Refused(refusal(&host, bad.ip())))
                    as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

impl GuardedConnector {
    /// The reqwest client under this policy: checking resolver, no proxy, no redirect. (The
    /// SaaS drives use it directly; they check address literals with [`check_endpoint`].)
    pub(crate) fn reqwest_client(&self) -> reqwest::Result<reqwest::Client> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut b = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .connect_timeout(self.timeout)
            .read_timeout(self.timeout)
            .user_agent(concat!("maljan-files/", env!("CARGO_PKG_VERSION")));
        if !self.allow_private {
            b = b.dns_resolver(Arc::new(CheckingResolver));
        }
        b.build()
    }
}

impl HttpConnector for GuardedConnector {
    fn connect(&self, _options: &ClientOptions) -> object_store::Result<HttpClient> {
        let client = self
            .reqwest_client()
            .map_err(|e| object_store::Error::Generic {
                store: "http",
                source: Box::new(e.without_url()),
            })?;
        Ok(HttpClient::new(Guarded {
            client,
            allow_private: self.allow_private,
        }))
    }
}

/// A plain reqwest client under the same policy (for WebDAV): the checking resolver unless the
/// profile allows private endpoints, no proxies, no redirects, and `ca_file`'s certificates
/// trusted besides the system's. The endpoint's address literal is checked by
/// [`check_endpoint`] before the client is used.
pub(crate) fn guarded_client(
    net: &Network,
    ca_file: Option<&std::path::Path>,
) -> Result<reqwest::Client, ToolError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let timeout = Duration::from_secs(net.timeout_s);
    let mut b = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .connect_timeout(timeout)
        .read_timeout(timeout)
        .user_agent(concat!("maljan-files/", env!("CARGO_PKG_VERSION")));
    if !net.allow_private_endpoint {
        b = b.dns_resolver(Arc::new(CheckingResolver));
    }
    if let Some(path) = ca_file {
        let pem = std::fs::read(path).map_err(|e| {
            ToolError::not_configured(format!(
                "the profile's ca_file {} cannot be read: {e}",
                path.display()
            ))
        })?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
            ToolError::not_configured(format!(
                "{} holds no PEM certificate: {}",
                path.display(),
                e.without_url()
            ))
        })?;
        b = b.tls_certs_merge(certs);
    }
    b.build().map_err(|e| {
        ToolError::tool_failed(format!(
            "the HTTP client cannot be built: {}",
            e.without_url()
        ))
    })
}

/// reqwest's client, with address literals checked before each request.
#[derive(Debug)]
struct Guarded {
    client: reqwest::Client,
    allow_private: bool,
}

#[async_trait::async_trait]
impl HttpService for Guarded {
    async fn call(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        if !self.allow_private
            && let Some(host) = req.uri().host()
            && let Some(ip) = literal(host)
            && !allowed(ip, false)
        {
            // Unknown: never retried.
            return Err(HttpError::new(
                HttpErrorKind::Unknown,
                Refused(refusal(host, ip)),
            ));
        }
        self.client.call(req).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_endpoints_need_the_profile() {
        let closed = Network::default();
        let open = Network {
            allow_private_endpoint: true,
            ..Default::default()
        };
        for e in [
            "http://127.0.0.1:9000",
            "http://[::1]:10000/dev",
            "http://2130706433/",
            "http://169.254.169.254/",
            "http://10.0.0.1",
        ] {
            assert!(check_endpoint(e, &closed).is_err(), "{e}");
            assert!(check_endpoint(e, &open).is_ok(), "{e}");
        }
        assert!(check_endpoint("https://8.8.8.8", &closed).is_ok());
        assert!(check_endpoint("ftp://8.8.8.8", &open).is_err());
    }
}
