//! The official conformance suite's client scenarios (the 0.2 line's requirement sets, both
//! legs: 2025-11-25 and 2026-07-28) against `maljan-conformance-client`, a small client built on
//! this runtime. Every scored scenario must pass; what the suite does not score (extensions such
//! as DPoP, private_key_jwt and enterprise authorization) is printed, not judged.
//!
//! What the legs exercise, among the rest: the handshake and tools/call over streamable HTTP,
//! SSE resumption, discovery first with the `initialize` fallback, per-request `_meta`,
//! `Mcp-Method`/`Mcp-Name`/`Mcp-Param-*` headers and tools whose `x-mcp-header` annotations are
//! invalid left out, `input_required` rounds (the runtime's input policy, `defaults` here), and
//! the OAuth 2.1 client: metadata discovery, PKCE, dynamic and metadata-document registration,
//! the token endpoint's three client authentications, scope selection and step-up, a new
//! authorization server (sign in again, register again), issuer checks, client credentials. The
//! conformance client signs in as `maljan servers login` does, the "browser" an HTTP client that
//! follows the authorization URL's redirect to the loopback listener. Needs MALJAN_NODE and
//! MALJAN_CONFORMANCE (from `scripts/peers.sh`).

use maljan_testkit::{bin_path, conformance::run_leg};

fn client_leg(revision: &str) {
    let client = bin_path("maljan-conformance-client");
    let client = client.to_str().expect("a UTF-8 path");
    run_leg("client", &["--command", client], revision);
}

#[test]
fn every_scored_client_scenario_passes_at_2025_11_25() {
    client_leg("2025-11-25");
}

#[test]
fn every_scored_client_scenario_passes_at_2026_07_28() {
    client_leg("2026-07-28");
}
