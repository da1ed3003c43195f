//! The work budget of one parse: how many items (descriptors, sections, imports, symbols, …) and
//! how many bytes of scanning (entropy, identification, copied names) a file may cost, both
//! proportional to the file's real size and never to the counts the file claims, plus the
//! call's cancellation.
//!
//! Every parser loop that a count from the file drives charges this budget; a file that claims
//! more than its size can hold runs it out, and the tool answers `tool_failed` naming the limit
//! instead of allocating or looping without bound. A cancelled call (or one past its timeout)
//! fails the next charge, so the work stops within one item of the cancellation.

use std::cell::Cell;

use maljan_server::ToolError;

/// Items a file may cost per byte it has, as a divisor: an honest table entry (thunk, section
/// record, symbol, resource entry) takes at least four bytes of the file.
const BYTES_PER_ITEM: usize = 4;
/// Items every file may cost whatever its size (tiny files with a few tables).
const BASE_ITEMS: usize = 4096;
/// Bytes a parse may scan per byte of the file: whole-file entropy, sections, resources, the
/// overlay and their identification each read the file at most once in an honest file.
const SCAN_FACTOR: u64 = 8;
/// Bytes every parse may scan whatever the file's size.
const BASE_SCAN: u64 = 1 << 20;
/// Bytes a parse may inflate per byte of the file (OOXML parts, VBA source): XML deflates 10-30x
/// in honest documents, overlapping zip entries and 1000x streams only in bombs.
const INFLATE_FACTOR: u64 = 64;
/// Bytes every parse may inflate whatever the file's size.
const BASE_INFLATE: u64 = 64 << 20;

pub struct Budget<'a> {
    file_len: usize,
    item_limit: usize,
    scan_limit: u64,
    inflate_limit: u64,
    items: Cell<usize>,
    scanned: Cell<u64>,
    inflated: Cell<u64>,
    cancel: &'a dyn Fn() -> bool,
}

impl<'a> Budget<'a> {
    /// The budget for parsing a file of `file_len` bytes; `cancel` answers whether the call has
    /// been cancelled or has run past its timeout.
    pub fn for_file(file_len: usize, cancel: &'a dyn Fn() -> bool) -> Self {
        Self {
            file_len,
            item_limit: file_len / BYTES_PER_ITEM + BASE_ITEMS,
            scan_limit: (file_len as u64)
                .saturating_mul(SCAN_FACTOR)
                .saturating_add(BASE_SCAN),
            inflate_limit: (file_len as u64)
                .saturating_mul(INFLATE_FACTOR)
                .saturating_add(BASE_INFLATE),
            items: Cell::new(0),
            scanned: Cell::new(0),
            inflated: Cell::new(0),
            cancel,
        }
    }

    /// Charges `n` items of `what` (e.g. "imports").
    pub fn items(&self, n: usize, what: &str) -> Result<(), ToolError> {
        self.check_cancel()?;
        let spent = self.items.get().saturating_add(n);
        self.items.set(spent);
        if spent > self.item_limit {
            return Err(self.exhausted(format!(
                "the file claims more {what} than a {}-byte file can hold (limit: {} items in all)",
                self.file_len, self.item_limit
            )));
        }
        Ok(())
    }

    /// Charges scanning `n` bytes for `what` (e.g. "section entropy").
    pub fn scan(&self, n: usize, what: &str) -> Result<(), ToolError> {
        self.check_cancel()?;
        let spent = self.scanned.get().saturating_add(n as u64);
        self.scanned.set(spent);
        if spent > self.scan_limit {
            return Err(self.exhausted(format!(
                "the file's {what} overlap so much that reading them costs more than {} bytes \
                 for a {}-byte file",
                self.scan_limit, self.file_len
            )));
        }
        Ok(())
    }

    /// Charges `n` bytes decompressed from the file for `what` (e.g. "OOXML parts").
    pub fn inflate(&self, n: usize, what: &str) -> Result<(), ToolError> {
        self.check_cancel()?;
        let spent = self.inflated.get().saturating_add(n as u64);
        self.inflated.set(spent);
        if spent > self.inflate_limit {
            return Err(self.exhausted(format!(
                "its {what} decompress to more than {} bytes for a {}-byte file (a \
                 decompression bomb, or entries sharing their data)",
                self.inflate_limit, self.file_len
            )));
        }
        Ok(())
    }

    /// How many more bytes may be inflated (for a library that takes a decompression limit).
    pub fn inflate_left(&self) -> u64 {
        self.inflate_limit.saturating_sub(self.inflated.get())
    }

    /// The Shannon entropy of `data`, charged as scanning it, counted a MiB at a time so that a
    /// cancellation stops a long region part-way.
    pub fn entropy(&self, data: &[u8], what: &str) -> Result<f64, ToolError> {
        self.scan(data.len(), what)?;
        let mut counts = [0u64; 256];
        for chunk in data.chunks(1 << 20) {
            self.check_cancel()?;
            crate::entropy::count_bytes(chunk, &mut counts);
        }
        Ok(crate::entropy::entropy_of(&counts))
    }

    /// Fails with `tool_failed` once the call is cancelled or its timeout has passed.
    pub fn check_cancel(&self) -> Result<(), ToolError> {
        if (self.cancel)() {
            Err(cancelled())
        } else {
            Ok(())
        }
    }

    fn exhausted(&self, message: String) -> ToolError {
        ToolError::tool_failed(format!("parsing stopped at its work budget: {message}"))
            .with_remediation(
                "the file is malformed or built to exhaust parsers; identify_file, strings, \
                 entropy (windows) and carve_payloads still read it",
            )
    }
}

/// The error a cancelled call (or one past its timeout) ends with.
pub fn cancelled() -> ToolError {
    ToolError::tool_failed("the call was cancelled").with_remediation("none needed")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_are_bounded_by_the_file_size() {
        let budget = Budget::for_file(4000, &|| false);
        budget.items(1000 + BASE_ITEMS, "imports").unwrap();
        let err = budget.items(1, "imports").unwrap_err();
        assert_eq!(err.code, maljan_server::ErrorCode::ToolFailed);
        assert!(err.message.contains("more imports than a 4000-byte file"));
    }

    #[test]
    fn scanning_is_bounded_by_the_file_size() {
        let budget = Budget::for_file(1000, &|| false);
        budget.scan(8000 + (1 << 20), "sections").unwrap();
        let err = budget.scan(1, "sections").unwrap_err();
        assert!(err.message.contains("sections"), "{}", err.message);
    }

    #[test]
    fn a_cancelled_call_fails_the_next_charge() {
        let budget = Budget::for_file(1000, &|| true);
        assert_eq!(
            budget.items(1, "sections").unwrap_err().message,
            "the call was cancelled"
        );
    }
}
