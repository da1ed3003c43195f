//! Fixture MCP server: see maljan_testkit::fixture::Behaviour::Garble.
fn main() {
    maljan_testkit::fixture::run(maljan_testkit::fixture::Behaviour::Garble);
}
