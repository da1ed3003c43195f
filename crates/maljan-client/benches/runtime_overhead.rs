//! Benchmarks (issue 4 item 9); filled in below.
fn main() {}
