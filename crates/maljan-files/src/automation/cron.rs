//! Cron expressions as automation-file writes them: 5 fields (minute, hour, day of month,
//! month, day of week), `*`, values, `a-b` ranges, `a,b` lists, `*/n` and `a-b/n` steps,
//! `jan`..`dec` and `sun`..`sat` names, plus the `@hourly`/`@daily`/... aliases automation-file
//! lacks; read in an IANA time zone (UTC when none is given). Day of month and day of week must
//! both match, as automation-file's `CronExpression.matches` has it (not Vixie cron's "either").
//! Parsing and the calendar search are croner's.

use std::str::FromStr;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use croner::{
    Cron,
    parser::{CronParser, Seconds, Year},
};

/// One parsed expression and the zone it is read in.
#[derive(Debug, Clone)]
pub(crate) struct CronSpec {
    cron: Cron,
    zone: Tz,
}

/// The longest expression accepted: a real one is a few dozen characters.
const MAX_LEN: usize = 256;

impl CronSpec {
    /// Parses `expression` in `timezone` (an IANA name such as "Asia/Taipei"; None is UTC).
    pub(crate) fn parse(expression: &str, timezone: Option<&str>) -> Result<Self, String> {
        let text = expression.trim();
        if text.is_empty() {
            return Err("cron: the expression is empty".into());
        }
        if text.len() > MAX_LEN {
            return Err(format!(
                "cron: the expression is longer than {MAX_LEN} characters"
            ));
        }
        if !text.starts_with('@') {
            let fields = text.split_whitespace().count();
            if fields != 5 {
                return Err(format!(
                    "cron: expected 5 fields (minute hour day-of-month month day-of-week), got {fields}: '{text}'"
                ));
            }
        } else if matches!(text.to_ascii_lowercase().as_str(), "@reboot") {
            return Err("cron: @reboot is not a time; a schedule needs one".into());
        }
        let parser = CronParser::builder()
            .seconds(Seconds::Disallowed)
            .year(Year::Disallowed)
            .dom_and_dow(true)
            .build();
        // croner's own checks stay panic-free on any input (the property test says so).
        let cron = parser
            .parse(text)
            .map_err(|e| format!("cron: '{text}': {e}"))?;
        let zone = match timezone.map(str::trim) {
            None => Tz::UTC,
            Some("") => {
                return Err(
                    "cron: a time zone is an IANA name such as 'Asia/Taipei', got ''".into(),
                );
            }
            Some(name) if name.eq_ignore_ascii_case("utc") => Tz::UTC,
            Some(name) => Tz::from_str(name).map_err(|_| {
                format!("cron: unknown time zone '{name}' (an IANA name such as 'Europe/Paris')")
            })?,
        };
        Ok(Self { cron, zone })
    }

    /// The first time strictly after `after` that the expression names, if any comes.
    pub(crate) fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = after.with_timezone(&self.zone);
        self.cron
            .find_next_occurrence(&local, false)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
    }

    #[test]
    fn ranges_lists_steps_names_and_aliases() {
        let next = |e: &str, from| CronSpec::parse(e, None).unwrap().next_after(from).unwrap();
        let from = at(2026, 1, 5, 10, 7); // a Monday
        assert_eq!(next("*/5 * * * *", from), at(2026, 1, 5, 10, 10));
        assert_eq!(next("0 9-17/4 * * *", from), at(2026, 1, 5, 13, 0));
        assert_eq!(next("15,45 * * * *", from), at(2026, 1, 5, 10, 15));
        assert_eq!(next("0 0 * jan-mar sat", from), at(2026, 1, 10, 0, 0));
        assert_eq!(next("@daily", from), at(2026, 1, 6, 0, 0));
        assert_eq!(next("@hourly", from), at(2026, 1, 5, 11, 0));
        // Both day fields must match: the 13th that is a Friday.
        assert_eq!(next("0 0 13 * fri", from), at(2026, 2, 13, 0, 0));
    }

    #[test]
    fn a_time_zone_moves_the_wall_clock() {
        let spec = CronSpec::parse("0 9 * * *", Some("Asia/Taipei")).unwrap();
        // 09:00 in Taipei is 01:00 UTC.
        assert_eq!(
            spec.next_after(at(2026, 1, 5, 0, 0)).unwrap(),
            at(2026, 1, 5, 1, 0)
        );
    }

    #[test]
    fn garbage_is_refused_with_the_reason() {
        for (bad, says) in [
            ("", "empty"),
            ("* * * *", "expected 5 fields"),
            ("* * * * * *", "expected 5 fields"),
            ("61 * * * *", "cron:"),
            ("*/0 * * * *", "cron:"),
            ("a b c d e", "cron:"),
            ("@reboot", "@reboot"),
        ] {
            let err = CronSpec::parse(bad, None).unwrap_err();
            assert!(err.contains(says), "{bad:?}: {err}");
        }
        let err = CronSpec::parse("* * * * *", Some("Mars/Olympus")).unwrap_err();
        assert!(err.contains("unknown time zone"), "{err}");
    }

    proptest::proptest! {
        /// Any text is parsed or refused with a reason that says it is about cron; a parsed one
        /// can be asked for its next time. Nothing panics.
        #[test]
        fn any_text_parses_or_is_refused_with_a_reason(text in "\\PC{0,60}", zone in proptest::option::of("[A-Za-z/_]{0,20}")) {
            match CronSpec::parse(&text, zone.as_deref()) {
                Ok(spec) => { let _ = spec.next_after(at(2026, 1, 5, 10, 7)); }
                Err(e) => proptest::prop_assert!(e.starts_with("cron:"), "{e}"),
            }
        }

        /// Field-shaped garbage (the characters cron uses, in 0 to 7 fields) likewise.
        #[test]
        fn cron_shaped_text_parses_or_is_refused(fields in proptest::collection::vec("[0-9*/,#LW?a-zA-Z-]{1,8}", 0..8)) {
            let text = fields.join(" ");
            match CronSpec::parse(&text, None) {
                Ok(spec) => { let _ = spec.next_after(at(2026, 1, 5, 10, 7)); }
                Err(e) => proptest::prop_assert!(e.starts_with("cron:"), "{e}"),
            }
        }

        /// `*/n` in the minute field fires at the next multiple of n.
        #[test]
        fn a_minute_step_fires_at_its_next_multiple(step in 1u32..60, minute in 0u32..60) {
            let spec = CronSpec::parse(&format!("*/{step} * * * *"), None).unwrap();
            let next = spec.next_after(at(2026, 1, 5, 10, minute)).unwrap();
            let want = (minute / step + 1) * step;
            let want = if want >= 60 { at(2026, 1, 5, 11, 0) } else { at(2026, 1, 5, 10, want) };
            proptest::prop_assert_eq!(next, want);
        }
    }
}
