//! Which argument of a tool takes the sample: one rule for the triage plan, the agent's catalog
//! and the client's hand-over. A tool declares its sample argument by naming an input-schema
//! property with one of [`SAMPLE_PARAMS`] (the built-in servers do); a third-party server whose
//! tools call it something else has it named in the client's config (`pin_sample = "NAME"`).
//! Nothing is guessed from other key names.

use serde_json::Value;

/// The names a sample argument may have, in order of preference.
pub const SAMPLE_PARAMS: &[&str] = &["path", "file_path", "sample", "sample_path"];

/// The sample argument of a tool with `input_schema`: `named` (the config's choice) when the
/// schema has that property, else the first of [`SAMPLE_PARAMS`] it has; None when it has none
/// (the tool does not take the sample).
pub fn sample_param<'a>(input_schema: &'a Value, named: Option<&'a str>) -> Option<&'a str> {
    let props = input_schema.get("properties")?.as_object()?;
    if let Some(n) = named {
        return props.contains_key(n).then_some(n);
    }
    SAMPLE_PARAMS
        .iter()
        .copied()
        .find(|p| props.contains_key(*p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_declared_name_or_the_first_known_one_and_nothing_guessed() {
        let s = json!({"properties": {"file_path": {}, "path": {}, "target_file": {}}});
        assert_eq!(sample_param(&s, None), Some("path"));
        assert_eq!(sample_param(&s, Some("target_file")), Some("target_file"));
        assert_eq!(sample_param(&s, Some("missing")), None);
        let third_party = json!({"properties": {"target_file": {}, "binary": {}}});
        assert_eq!(sample_param(&third_party, None), None);
        assert_eq!(sample_param(&json!({}), None), None);
    }
}
