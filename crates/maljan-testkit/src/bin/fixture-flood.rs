//! Fixture MCP server: see maljan_testkit::fixture::Behaviour::Flood.
fn main() {
    maljan_testkit::fixture::run(maljan_testkit::fixture::Behaviour::Flood);
}
