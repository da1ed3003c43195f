//! Tool schemas every host takes: the one transform every tool's input and output schema goes
//! through when the registry derives it (see `registry::generator`), so that no tool has to be
//! written with portability in mind.
//!
//! What schemars writes is valid JSON Schema 2020-12, but not every host takes all of it
//! (`mcp-inspector --cli --strict` lists what breaks where). The transform rewrites, keeping the
//! contract (what validates stays what validates):
//!
//! - a `type` array (`["string", "null"]`, schemars' spelling of an `Option<T>`) becomes `anyOf`
//!   branches of one `type` each, the type-specific keywords moved into their branch and an
//!   `enum` split by type. Null stays a value of its own (`{"type": "null"}`): an output field
//!   serialised as `null` must validate, and a caller may send `null` for an absent argument;
//! - a schema that constrains nothing (`true`, `{}`, or only annotations such as a description —
//!   a `serde_json::Value`) is declared as what it is, any JSON value: an `anyOf` of the six JSON
//!   types. A field whose values are narrower says so in its own type's schema;
//! - a bare `false` where a schema is expected becomes `{"not": {}}`;
//! - schemars' integer-width formats (`uint64`, …), which are not JSON Schema formats and which
//!   validators such as Ajv warn about on every call, are dropped: `minimum` already says what
//!   matters.

use maljan_protocol::schema::CONSTRAINING_KEYWORDS;
use schemars::{Schema, transform::Transform};
use serde_json::{Map, Value, json};

/// The transform, for a schemars generator's settings (`SchemaSettings::with_transform`).
#[derive(Debug, Clone, Copy, Default)]
pub struct PortableSchema;

impl Transform for PortableSchema {
    fn transform(&mut self, schema: &mut Schema) {
        let mut value = std::mem::replace(schema, Schema::from(true)).to_value();
        make_portable(&mut value);
        *schema = Schema::try_from(value).unwrap_or_else(|_| Schema::from(true));
    }
}

/// Rewrites `schema` (a whole schema document) in place; see the module's description.
pub fn make_portable(schema: &mut Value) {
    walk(schema, None, 0);
}

/// Keywords whose value may be a bare boolean: `false` there closes the object or array, which
/// every host understands.
const BOOLEAN_VALUED: &[&str] = &[
    "additionalProperties",
    "unevaluatedProperties",
    "additionalItems",
    "unevaluatedItems",
];

/// Keywords that hold one subschema.
const ONE_SUBSCHEMA: &[&str] = &[
    "items",
    "contains",
    "not",
    "propertyNames",
    "if",
    "then",
    "else",
    "additionalProperties",
    "unevaluatedProperties",
    "additionalItems",
    "unevaluatedItems",
    "contentSchema",
];
/// Keywords that hold an array of subschemas.
const SUBSCHEMA_LIST: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems"];
/// Keywords that hold a map of subschemas.
const SUBSCHEMA_MAP: &[&str] = &[
    "properties",
    "patternProperties",
    "dependentSchemas",
    "$defs",
    "definitions",
];

/// schemars' integer and float widths: not JSON Schema formats.
const NUMERIC_FORMATS: &[&str] = &[
    "int", "int8", "int16", "int32", "int64", "int128", "uint", "uint8", "uint16", "uint32",
    "uint64", "uint128", "float", "double",
];

/// Deep enough for any schema a Rust type derives; a deeper one is left as it is.
const MAX_DEPTH: usize = 128;

/// Any JSON value, declared as such: one branch per JSON type (`integer` is in `number`).
pub fn any_json_value() -> Value {
    json!([
        {"type": "object"},
        {"type": "array"},
        {"type": "string"},
        {"type": "number"},
        {"type": "boolean"},
        {"type": "null"},
    ])
}

fn walk(node: &mut Value, keyword: Option<&str>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    if let Value::Bool(b) = node {
        if keyword.is_some_and(|k| BOOLEAN_VALUED.contains(&k)) {
            return;
        }
        *node = if *b {
            json!({"anyOf": any_json_value()})
        } else {
            json!({"not": {}})
        };
        return;
    }
    let Value::Object(map) = node else { return };
    if map
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|f| NUMERIC_FORMATS.contains(&f))
    {
        map.remove("format");
    }
    if map.get("type").is_some_and(Value::is_array) {
        split_type_array(map);
    }
    // Under `not`, `{}` is the exact always-true schema; anywhere else it is a value left undeclared.
    let constrains = map
        .keys()
        .any(|k| CONSTRAINING_KEYWORDS.contains(&k.as_str()))
        || (map.contains_key("if") && (map.contains_key("then") || map.contains_key("else")));
    if !constrains && keyword != Some("not") {
        map.insert("anyOf".into(), any_json_value());
    }
    for (key, value) in map.iter_mut() {
        let key = key.as_str();
        if ONE_SUBSCHEMA.contains(&key) {
            match value {
                // The pre-2020-12 tuple form of `items`.
                Value::Array(items) if key == "items" => {
                    for item in items {
                        walk(item, Some(key), depth + 1);
                    }
                }
                _ => walk(value, Some(key), depth + 1),
            }
        } else if SUBSCHEMA_LIST.contains(&key) {
            for item in value.as_array_mut().into_iter().flatten() {
                walk(item, Some(key), depth + 1);
            }
        } else if SUBSCHEMA_MAP.contains(&key) {
            for item in value
                .as_object_mut()
                .into_iter()
                .flat_map(|m| m.values_mut())
            {
                walk(item, Some(key), depth + 1);
            }
        }
    }
}

/// Which JSON type a type-specific keyword constrains (None: it applies to any instance).
fn keyword_type(keyword: &str) -> Option<&'static str> {
    Some(match keyword {
        "minLength" | "maxLength" | "pattern" | "format" | "contentEncoding"
        | "contentMediaType" | "contentSchema" => "string",
        "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf" => "number",
        "items" | "prefixItems" | "contains" | "minItems" | "maxItems" | "uniqueItems"
        | "minContains" | "maxContains" | "unevaluatedItems" | "additionalItems" => "array",
        "properties"
        | "required"
        | "additionalProperties"
        | "patternProperties"
        | "propertyNames"
        | "minProperties"
        | "maxProperties"
        | "dependentRequired"
        | "dependentSchemas"
        | "unevaluatedProperties" => "object",
        _ => return None,
    })
}

/// Whether `value` is an instance of the JSON type `ty`.
fn is_of_type(value: &Value, ty: &str) -> bool {
    match ty {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => {
            value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        "array" => value.is_array(),
        "object" => value.is_object(),
        _ => false,
    }
}

/// `{"type": [A, B], …}` → `{"anyOf": [{"type": A, …A's keywords}, {"type": B, …}], …the rest}`.
fn split_type_array(map: &mut Map<String, Value>) {
    let Some(Value::Array(types)) = map.remove("type") else {
        return;
    };
    let types: Vec<String> = types
        .iter()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect();
    if let [only] = types.as_slice() {
        map.insert("type".into(), Value::String(only.clone()));
        return;
    }
    if types.is_empty() {
        return;
    }
    // Keywords that belong to one type move into that type's branch (numeric ones into both
    // `number` and `integer`); `enum` and `const` are split by their values' types.
    // A keyword of a type not listed constrains nothing here; it stays where it is.
    let listed = |owner: &str| {
        types
            .iter()
            .any(|t| t == owner || (owner == "number" && t == "integer"))
    };
    let mut typed: Vec<(String, Value)> = Vec::new();
    for key in map.keys().cloned().collect::<Vec<_>>() {
        if keyword_type(&key).is_some_and(listed) {
            let value = map.remove(&key).unwrap_or(Value::Null);
            typed.push((key, value));
        }
    }
    let enumerated = map.remove("enum");
    let constant = map.remove("const");
    let mut branches = Vec::new();
    for ty in &types {
        let mut branch = Map::new();
        branch.insert("type".into(), Value::String(ty.clone()));
        for (key, value) in &typed {
            let owner = keyword_type(key).unwrap_or_default();
            if owner == ty || (owner == "number" && ty == "integer") {
                branch.insert(key.clone(), value.clone());
            }
        }
        if let Some(Value::Array(values)) = &enumerated {
            let of_type: Vec<Value> = (values.iter())
                .filter(|v| is_of_type(v, ty))
                .cloned()
                .collect();
            match of_type.len() {
                0 => continue,
                // `{"type": "null"}` already says all `[null]` would.
                1 if ty == "null" => {}
                _ => {
                    branch.insert("enum".into(), Value::Array(of_type));
                }
            }
        }
        if let Some(c) = &constant {
            if !is_of_type(c, ty) {
                continue;
            }
            branch.insert("const".into(), c.clone());
        }
        branches.push(Value::Object(branch));
    }
    if let Some(existing) = map.remove("anyOf") {
        let mut all = match map.remove("allOf") {
            Some(Value::Array(all)) => all,
            _ => Vec::new(),
        };
        all.push(json!({"anyOf": existing}));
        map.insert("allOf".into(), Value::Array(all));
    }
    match branches.len() {
        // Nothing fits every keyword at once: as before, no value validates.
        0 => {
            map.insert("not".into(), json!({}));
        }
        1 => {
            if let Some(Value::Object(branch)) = branches.pop() {
                map.extend(branch);
            }
        }
        _ => {
            map.insert("anyOf".into(), Value::Array(branches));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn portable(mut v: Value) -> Value {
        make_portable(&mut v);
        v
    }

    #[test]
    fn a_nullable_type_becomes_anyof_branches_with_its_keywords_in_its_branch() {
        let got = portable(json!({"type": "object", "properties": {
            "name": {"type": ["string", "null"], "description": "d", "default": null,
                     "minLength": 1, "format": "uri", "writeOnly": true},
            "count": {"type": ["integer", "null"], "format": "uint64", "minimum": 0},
        }}));
        assert_eq!(
            got["properties"]["name"],
            json!({"description": "d", "default": null, "writeOnly": true, "anyOf": [
                {"type": "string", "minLength": 1, "format": "uri"}, {"type": "null"}]})
        );
        assert_eq!(
            got["properties"]["count"],
            json!({"anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}]})
        );
    }

    #[test]
    fn a_nullable_enum_is_split_by_its_values_types() {
        let got = portable(json!({"type": ["string", "null"], "enum": ["fast", "slow", null]}));
        assert_eq!(
            got,
            json!({"anyOf": [{"type": "string", "enum": ["fast", "slow"]}, {"type": "null"}]})
        );
        let got = portable(json!({"type": ["string", "integer"], "enum": ["a", 1, 2.5]}));
        assert_eq!(
            got,
            json!({"anyOf": [{"type": "string", "enum": ["a"]}, {"type": "integer", "enum": [1]}]})
        );
        assert_eq!(
            portable(json!({"type": ["string"], "maxLength": 3})),
            json!({"type": "string", "maxLength": 3})
        );
    }

    #[test]
    fn object_and_array_keywords_go_to_their_own_branch() {
        let got = portable(
            json!({"type": ["object", "null"], "properties": {"a": {"type": "string"}},
                                   "required": ["a"], "additionalProperties": false}),
        );
        assert_eq!(
            got,
            json!({"anyOf": [{"type": "object", "properties": {"a": {"type": "string"}},
                              "required": ["a"], "additionalProperties": false}, {"type": "null"}]})
        );
        let got = portable(json!({"type": ["array", "null"], "items": true}));
        assert_eq!(
            got,
            json!({"anyOf": [{"type": "array", "items": {"anyOf": any_json_value()}},
                              {"type": "null"}]})
        );
    }

    #[test]
    fn a_schema_that_constrains_nothing_is_declared_any_json_value() {
        let got = portable(json!({"type": "object", "properties": {
            "value": {"description": "any JSON"},
            "empty": {},
            "flag": false,
            "list": {"type": "array", "items": true},
        }, "additionalProperties": false}));
        let any = json!({"anyOf": any_json_value()});
        assert_eq!(
            got["properties"]["value"],
            json!({"description": "any JSON", "anyOf": any_json_value()})
        );
        assert_eq!(got["properties"]["empty"], any);
        assert_eq!(got["properties"]["flag"], json!({"not": {}}));
        assert_eq!(got["properties"]["list"]["items"], any);
        assert_eq!(
            got["additionalProperties"], false,
            "a boolean keyword stays"
        );
        // `{}` under `not` is the exact always-true schema, and stays.
        assert_eq!(portable(json!({"not": {}})), json!({"not": {}}));
    }

    #[test]
    fn an_existing_anyof_beside_a_type_array_is_kept_under_allof() {
        let got = portable(json!({"type": ["string", "null"],
                                   "anyOf": [{"minLength": 1}, {"type": "null"}]}));
        assert_eq!(
            got,
            json!({"allOf": [{"anyOf": [{"minLength": 1}, {"type": "null"}]}],
                   "anyOf": [{"type": "string"}, {"type": "null"}]})
        );
    }

    #[test]
    fn the_transform_runs_inside_a_schemars_generator() {
        #[derive(schemars::JsonSchema)]
        #[allow(dead_code)]
        struct Args {
            note: Option<String>,
            value: serde_json::Value,
            limit: Option<u32>,
        }
        let mut settings = schemars::generate::SchemaSettings::draft2020_12();
        settings.inline_subschemas = true;
        let schema = settings
            .with_transform(PortableSchema)
            .into_generator()
            .into_root_schema_for::<Args>()
            .to_value();
        let props = &schema["properties"];
        assert_eq!(
            props["note"],
            json!({"anyOf": [{"type": "string"}, {"type": "null"}]})
        );
        assert_eq!(props["value"], json!({"anyOf": any_json_value()}));
        assert_eq!(
            props["limit"],
            json!({"anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}]})
        );
    }
}
