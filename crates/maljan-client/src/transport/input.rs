//! What the runtime answers when a 2026-07-28 server's result is `input_required` (the server
//! asks the client something before it goes on): maljan runs jobs without a person, so its policy
//! declines, with a reason, and never waits. An elicitation is declined (`action: decline`), a
//! roots request gets no roots, a state-only round is retried as the protocol asks; a request to
//! sample the client's model ends the call, since there is no declining shape for it.

use rmcp::model::{InputRequest, InputRequiredResult, InputResponses};
use serde_json::json;

/// Said to the server with every decline, and to the caller when the call ends for it.
pub(crate) const DECLINE_REASON: &str =
    "maljan runs unattended and declines what a tool server asks of the client (policy: decline)";

/// How many input-required rounds a call answers before the runtime ends it.
pub(crate) const MAX_INPUT_ROUNDS: usize = 3;

/// The retry's `inputResponses` and echoed `requestState`, or why the call ends here.
pub(crate) fn decline(
    asked: InputRequiredResult,
) -> Result<(Option<InputResponses>, Option<String>), String> {
    let mut responses = InputResponses::new();
    for (key, request) in asked.input_requests.unwrap_or_default() {
        let answer = match request {
            InputRequest::Elicitation(_) => {
                json!({"action": "decline", "_meta": {"maljan/reason": DECLINE_REASON}})
            }
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
