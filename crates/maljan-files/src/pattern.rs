//! Regular expressions as Python's `re` takes them. Every pattern the linear-time `regex` crate
//! accepts runs there; only what it refuses by design — look-around and back-references — falls
//! back to fancy-regex's backtracking engine, under a step budget, so a catastrophic pattern ends
//! with a clear error instead of holding a worker (the budget Python does not have).

use maljan_server::ToolError;

/// Compiled-program size for either engine.
const SIZE_LIMIT: usize = 64 << 20;
/// Backtracking steps one search may take before it is given up.
const BACKTRACK_LIMIT: usize = 1_000_000;

/// How a pattern is read, as Python's `re` flags.
#[derive(Clone, Copy, Default)]
pub(crate) struct Flags {
    pub ignore_case: bool,
    pub multi_line: bool,
}

/// A pattern over text (sed-like replacement, matching a whole string).
pub(crate) enum TextPattern {
    Linear(regex::Regex),
    Backtracking(fancy_regex::Regex),
}

/// A pattern over bytes that may not be UTF-8 (grep over files).
pub(crate) enum BytesPattern {
    Linear(regex::bytes::Regex),
    Backtracking(fancy_regex::Regex),
}

impl TextPattern {
    pub(crate) fn new(source: &str, flags: Flags) -> Result<Self, ToolError> {
        let linear = regex::RegexBuilder::new(source)
            .case_insensitive(flags.ignore_case)
            .multi_line(flags.multi_line)
            .size_limit(SIZE_LIMIT)
            .build();
        match linear {
            Ok(re) => Ok(Self::Linear(re)),
            Err(e) => backtracking(source, flags, &e.to_string()).map(Self::Backtracking),
        }
    }

    /// How many matches there are in `text`.
    pub(crate) fn count(&self, text: &str) -> Result<usize, ToolError> {
        match self {
            Self::Linear(re) => Ok(re.find_iter(text).count()),
            Self::Backtracking(re) => re
                .find_iter(text)
                .try_fold(0, |n, m| m.map(|_| n + 1).map_err(over_budget)),
        }
    }

    /// `text` with the first `limit` matches (every match when 0) replaced by `replacement`,
    /// written in the `regex` crate's `$1` / `${name}` syntax.
    pub(crate) fn replacen(
        &self,
        text: &str,
        limit: usize,
        replacement: &str,
    ) -> Result<String, ToolError> {
        match self {
            Self::Linear(re) => Ok(re.replacen(text, limit, replacement).into_owned()),
            Self::Backtracking(re) => re
                .try_replacen(text, limit, replacement)
                .map(|s| s.into_owned())
                .map_err(over_budget),
        }
    }
}

impl BytesPattern {
    pub(crate) fn new(source: &str, flags: Flags) -> Result<Self, ToolError> {
        let linear = regex::bytes::RegexBuilder::new(source)
            .case_insensitive(flags.ignore_case)
            .multi_line(flags.multi_line)
            .size_limit(SIZE_LIMIT)
            .build();
        match linear {
            Ok(re) => Ok(Self::Linear(re)),
            Err(e) => backtracking(source, flags, &e.to_string()).map(Self::Backtracking),
        }
    }

    pub(crate) fn is_match(&self, bytes: &[u8]) -> Result<bool, ToolError> {
        match self {
            Self::Linear(re) => Ok(re.is_match(bytes)),
            // Undecodable bytes are dropped first, as automation-file reads with errors="ignore".
            Self::Backtracking(re) => re
                .is_match(&String::from_utf8_lossy(bytes).replace('\u{FFFD}', ""))
                .map_err(over_budget),
        }
    }

    /// Whether the linear engine runs it: only then is a whole-file prefilter cheap.
    pub(crate) fn is_linear(&self) -> bool {
        matches!(self, Self::Linear(_))
    }
}

/// The backtracking form of a pattern the `regex` crate refused with `refusal`; when the pattern
/// is not valid there either, the error the user can act on.
fn backtracking(
    source: &str,
    flags: Flags,
    refusal: &str,
) -> Result<fancy_regex::Regex, ToolError> {
    let mut builder = fancy_regex::RegexBuilder::new(source);
    builder
        .case_insensitive(flags.ignore_case)
        .multi_line(flags.multi_line)
        .backtrack_limit(BACKTRACK_LIMIT)
        .delegate_size_limit(SIZE_LIMIT);
    builder.build().map_err(|e| {
        // The regex crate's message is the clearer one, unless it refused a feature
        // (look-around, back-references) that the backtracking engine took and then found
        // something else wrong with.
        let message = if refusal.contains("not supported") {
            e.to_string()
        } else {
            refusal.to_owned()
        };
        ToolError::bad_argument(format!(
            "pattern is not a valid regular expression: {message}"
        ))
    })
}

fn over_budget(e: fancy_regex::Error) -> ToolError {
    let why = match e {
        fancy_regex::Error::RuntimeError(fancy_regex::RuntimeError::BacktrackLimitExceeded) => {
            format!("it needs over {BACKTRACK_LIMIT} backtracking steps")
        }
        other => other.to_string(),
    };
    ToolError::bad_argument(format!("the pattern gave up on this input: {why}")).with_remediation(
        "look-around and back-references run on a backtracking engine with a step budget; \
         anchor the pattern or avoid nested repetition such as (a+)+",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_linear_engine_takes_stays_there() {
        assert!(matches!(
            TextPattern::new(r"\d+", Flags::default()).unwrap(),
            TextPattern::Linear(_)
        ));
        assert!(
            BytesPattern::new(r"a.c", Flags::default())
                .unwrap()
                .is_linear()
        );
    }

    #[test]
    fn look_around_and_back_references_run_as_python_runs_them() {
        let re = TextPattern::new(r"(?<=\$)\d+", Flags::default()).unwrap();
        assert_eq!(re.count("$5 and 6 and $70").unwrap(), 2);
        assert_eq!(re.replacen("$5 and $70", 0, "N").unwrap(), "$N and $N");
        let doubled = TextPattern::new(r"\b(\w+) \1\b", Flags::default()).unwrap();
        assert_eq!(
            doubled.replacen("it is is so so", 1, "$1").unwrap(),
            "it is so so"
        );
        let ahead = BytesPattern::new(r"foo(?!bar)", Flags::default()).unwrap();
        assert!(!ahead.is_linear());
        assert!(ahead.is_match(b"foobaz").unwrap());
        assert!(!ahead.is_match(b"foobar").unwrap());
        // Bytes that are not UTF-8 are searched, not refused.
        assert!(ahead.is_match(b"\xFF\xFEfoo!").unwrap());
        let ci = TextPattern::new(
            r"(?=X)x",
            Flags {
                ignore_case: true,
                ..Flags::default()
            },
        )
        .unwrap();
        assert_eq!(ci.count("xX").unwrap(), 2);
    }

    #[test]
    fn a_catastrophic_pattern_ends_with_a_clear_error() {
        let re = TextPattern::new(r"(x+x+)+y\1", Flags::default()).unwrap();
        let input = "x".repeat(30);
        let err = re.count(&input).unwrap_err();
        assert_eq!(err.code.as_str(), "bad_argument");
        assert!(err.message.contains("gave up"), "{}", err.message);
    }

    #[test]
    fn an_invalid_pattern_says_what_is_wrong() {
        let err = TextPattern::new(r"(?<=a)(", Flags::default())
            .map(drop)
            .unwrap_err();
        assert!(
            err.message.contains("not a valid regular expression"),
            "{}",
            err.message
        );
        let err = TextPattern::new(r"[z-a]", Flags::default())
            .map(drop)
            .unwrap_err();
        assert!(
            err.message.contains("not a valid regular expression"),
            "{}",
            err.message
        );
    }
}
