//! What the runtime answers when a server asks the client something before it goes on: a
//! 2026-07-28 result that is `input_required`, or an older server's `elicitation/create` request
//! ([`Unattended`], the rmcp client handler). maljan runs jobs without a person, so nothing here
//! waits: by `core.mcp.input_policy` an elicitation is declined with the reason (or, under
//! `defaults`, accepted when its schema gives a default for every field it asks for), a roots
//! request gets no roots, a state-only round is retried as the protocol asks; a request to
//! sample the client's model ends the call, since there is no declining shape for it.

use rmcp::{
    ClientHandler, ErrorData, RoleClient,
    model::{
        ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction, InputRequest,
        InputRequiredResult, InputResponses,
    },
    service::RequestContext,
};
use serde_json::{Map, Value, json};

use crate::config::InputPolicy;

/// Said to the server with every decline, and to the caller when the call ends for it.
pub(crate) const DECLINE_REASON: &str =
    "maljan runs unattended and declines what a tool server asks of the client (policy: decline)";

/// How many input-required rounds a call answers before the runtime ends it.
pub(crate) const MAX_INPUT_ROUNDS: usize = 3;

/// The rmcp client handler: the client's declared capabilities, and the answer to an older
/// server's `elicitation/create` by the policy.
#[derive(Clone)]
pub(crate) struct Unattended {
    pub(crate) config: ClientConfig,
    pub(crate) policy: InputPolicy,
}

impl ClientHandler for Unattended {
    fn get_info(&self) -> ClientConfig {
        self.config.clone()
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Ok(serde_json::from_value(elicitation(&request, self.policy))
            .unwrap_or_else(|_| ElicitResult::new(ElicitationAction::Decline)))
    }
}

/// The answer to one elicitation (form or URL) under `policy`, as the wire has it.
fn elicitation(request: &ElicitRequestParams, policy: InputPolicy) -> Value {
    if policy == InputPolicy::Defaults
        && let ElicitRequestParams::FormElicitationParams {
            requested_schema, ..
        } = request
        && let Some(content) = serde_json::to_value(requested_schema)
            .ok()
            .and_then(|schema| defaults(&schema))
    {
        return json!({"action": "accept", "content": content});
    }
    json!({"action": "decline", "_meta": {"maljan/reason": DECLINE_REASON}})
}

/// The form's answer made of its schema's defaults alone: `None` unless every field it asks for
/// has one. A field without a default, required or not, needs a person (an empty "accept" to a
/// confirmation form would read as consent).
fn defaults(schema: &Value) -> Option<Map<String, Value>> {
    let properties = schema["properties"].as_object()?;
    let content: Map<String, Value> = properties
        .iter()
        .map(|(field, spec)| Some((field.clone(), spec.get("default")?.clone())))
        .collect::<Option<_>>()?;
    (!content.is_empty()).then_some(content)
}

/// The retry's `inputResponses` and echoed `requestState` under `policy`, or why the call ends
/// here.
pub(crate) fn answer(
    asked: InputRequiredResult,
    policy: InputPolicy,
) -> Result<(Option<InputResponses>, Option<String>), String> {
    let mut responses = InputResponses::new();
    for (key, request) in asked.input_requests.unwrap_or_default() {
        let answer = match request {
            InputRequest::Elicitation(asked) => elicitation(&asked.params, policy),
            InputRequest::ListRoots(_) => json!({"roots": []}),
            InputRequest::CreateMessage(_) => {
                return Err(format!(
                    "the server asked the client's model for a completion (sampling/createMessage); {DECLINE_REASON}"
                ));
            }
            _ => {
                return Err(format!(
                    "the server asked the client for input of a kind it does not know; {DECLINE_REASON}"
                ));
            }
        };
        responses.insert(key, answer);
    }
    if responses.is_empty() && asked.request_state.is_none() {
        return Err("the server asked for input but sent neither requests nor state".into());
    }
    Ok((
        (!responses.is_empty()).then_some(responses),
        asked.request_state,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decline(
        asked: InputRequiredResult,
    ) -> Result<(Option<InputResponses>, Option<String>), String> {
        answer(asked, InputPolicy::Decline)
    }

    fn form(schema: Value) -> InputRequiredResult {
        asked(json!({
            "resultType": "input_required",
            "inputRequests": {"f": {"method": "elicitation/create", "params": {
                "message": "fill in", "requestedSchema": schema}}}
        }))
    }

    #[test]
    fn defaults_policy_accepts_a_form_its_defaults_answer() {
        let (responses, _) = answer(
            form(json!({"type": "object", "properties": {
                "name": {"type": "string", "default": "John Doe"},
                "age": {"type": "integer", "default": 30}}, "required": ["name"]})),
            InputPolicy::Defaults,
        )
        .unwrap();
        let f = &responses.unwrap()["f"];
        assert_eq!(f["action"], "accept");
        assert_eq!(f["content"], json!({"name": "John Doe", "age": 30}));
    }

    #[test]
    fn defaults_policy_declines_a_field_without_one_required_or_not() {
        for schema in [
            json!({"type": "object", "properties": {
                "name": {"type": "string"}, "age": {"type": "integer", "default": 30}},
                "required": ["name"]}),
            json!({"type": "object", "properties": {
                "confirmed": {"type": "boolean"}, "age": {"type": "integer", "default": 30}}}),
            json!({"type": "object", "properties": {}}),
        ] {
            let (responses, _) = answer(form(schema.clone()), InputPolicy::Defaults).unwrap();
            assert_eq!(responses.unwrap()["f"]["action"], "decline", "{schema}");
        }
    }

    #[test]
    fn decline_policy_declines_even_a_form_with_defaults() {
        let (responses, _) = decline(form(json!({"type": "object", "properties": {
            "name": {"type": "string", "default": "x"}}})))
        .unwrap();
        assert_eq!(responses.unwrap()["f"]["action"], "decline");
    }

    fn asked(v: serde_json::Value) -> InputRequiredResult {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn elicitation_is_declined_with_the_reason_and_state_echoed() {
        let (responses, state) = decline(asked(json!({
            "resultType": "input_required",
            "inputRequests": {"who": {"method": "elicitation/create", "params": {
                "message": "name?", "requestedSchema": {"type": "object", "properties": {}}}}},
            "requestState": "opaque"
        })))
        .unwrap();
        let responses = responses.unwrap();
        assert_eq!(responses["who"]["action"], "decline");
        assert_eq!(responses["who"]["_meta"]["maljan/reason"], DECLINE_REASON);
        assert_eq!(state.as_deref(), Some("opaque"));
    }

    #[test]
    fn sampling_ends_the_call() {
        let why = decline(asked(json!({
            "resultType": "input_required",
            "inputRequests": {"s": {"method": "sampling/createMessage", "params": {
                "messages": [], "maxTokens": 5}}}
        })))
        .unwrap_err();
        assert!(why.contains("sampling/createMessage"), "{why}");
    }

    #[test]
    fn a_state_only_round_is_retried_with_its_state() {
        let (responses, state) = decline(asked(json!({
            "resultType": "input_required", "requestState": "s1"
        })))
        .unwrap();
        assert!(responses.is_none());
        assert_eq!(state.as_deref(), Some("s1"));
    }
}
