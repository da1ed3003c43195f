//! The suite's multi-round-trip tools and prompt (SEP-2322, 2026-07-28): each answers
//! `input_required` with the requests it names until the client's retry carries the answers,
//! then a complete result. A `requestState` it hands out is sealed with rmcp's own
//! `RequestStateCodec` (HMAC), so a state the client changed is refused, never trusted.

use maljan_server::rmcp::{
    ErrorData as McpError, RoleServer,
    model::{
        CallToolRequestParams, CallToolResponse, ClientCapabilities, GetPromptRequestParams,
        GetPromptResponse, InputRequiredResult, InputResponses, RequestStateCodec,
    },
    service::RequestContext,
};
use serde_json::{Value, json};

use crate::{complete_result, from_json};

pub const PROMPT: &str = "test_input_required_result_prompt";

/// The tools (name, description), all without arguments.
pub const TOOLS: [(&str, &str); 8] = [
    (
        "test_input_required_result_elicitation",
        "Asks the client for a name",
    ),
    (
        "test_input_required_result_sampling",
        "Asks the client's model a question",
    ),
    (
        "test_input_required_result_list_roots",
        "Asks the client for its roots",
    ),
    (
        "test_input_required_result_request_state",
        "Asks for a confirmation, with state",
    ),
    (
        "test_input_required_result_multiple_inputs",
        "Asks for three things at once",
    ),
    (
        "test_input_required_result_multi_round",
        "Asks twice, in two rounds",
    ),
    (
        "test_input_required_result_tampered_state",
        "Refuses a state it did not seal",
    ),
    (
        "test_input_required_result_capabilities",
        "Asks only for what the client declared",
    ),
];

/// Seals and opens the states these tools hand out; one key per process.
pub struct States(RequestStateCodec);

impl States {
    pub fn new() -> Self {
        let key: Vec<u8> = (0..2)
            .flat_map(|_| uuid::Uuid::new_v4().into_bytes())
            .collect();
        Self(RequestStateCodec::try_new(key).expect("a 32-byte key"))
    }

    fn seal(&self, round: &str) -> String {
        self.0.seal(round.as_bytes())
    }

    /// The round a state names, or the refusal of a state this server did not seal.
    fn open(&self, state: Option<&str>) -> Result<String, McpError> {
        let state =
            state.ok_or_else(|| McpError::invalid_params("requestState is missing", None))?;
        let round = self.0.open(state).map_err(|_| {
            McpError::invalid_params("requestState failed its integrity check", None)
        })?;
        Ok(String::from_utf8_lossy(&round).into_owned())
    }
}

fn elicit(message: &str, field: &str, kind: &str) -> Value {
    json!({"method": "elicitation/create", "params": {"message": message, "requestedSchema": {
        "type": "object", "properties": {field: {"type": kind}}, "required": [field]}}})
}

fn sample(text: &str, max_tokens: u32) -> Value {
    json!({"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
        "maxTokens": max_tokens}})
}

fn roots() -> Value {
    json!({"method": "roots/list", "params": {}})
}

fn input_required(requests: Value, state: Option<String>) -> Result<InputRequiredResult, McpError> {
    let mut v = json!({"resultType": "input_required", "inputRequests": requests});
    if let Some(state) = state {
        v["requestState"] = json!(state);
    }
    from_json(v)
}

fn text(t: String) -> Result<CallToolResponse, McpError> {
    Ok(CallToolResponse::Complete(complete_result(
        json!({"content": [{"type": "text", "text": t}]}),
    )?))
}

/// The accepted elicitation answer's `field`, or why the answer under `key` is no answer.
fn answered(responses: &InputResponses, key: &str, field: &str) -> Result<String, McpError> {
    let answer = &responses[key];
    match (answer["action"].as_str(), &answer["content"][field]) {
        (Some("accept"), Value::String(s)) => Ok(s.clone()),
        (Some("accept"), Value::Bool(b)) => Ok(b.to_string()),
        (Some(action @ ("decline" | "cancel")), _) => Ok(format!("({action}d)")),
        _ => Err(McpError::invalid_params(
            format!("inputResponses.{key} is not an elicitation result with '{field}'"),
            None,
        )),
    }
}

/// Whether every key the server asked for is answered; extra keys are ignored.
fn has_all(responses: &Option<InputResponses>, keys: &[&str]) -> bool {
    responses
        .as_ref()
        .is_some_and(|r| keys.iter().all(|k| r.contains_key(*k)))
}

pub fn call(
    states: &States,
    request: &CallToolRequestParams,
    ctx: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, McpError> {
    let responses = &request.input_responses;
    let state = request.request_state.as_deref();
    let ask = |requests: Value, state: Option<String>| {
        input_required(requests, state).map(CallToolResponse::InputRequired)
    };
    match request.name.as_ref() {
        "test_input_required_result_elicitation" => match responses {
            Some(r) if r.contains_key("user_name") => {
                text(format!("Hello, {}!", answered(r, "user_name", "name")?))
            }
            // Missing or wrong keys: ask again rather than fail (the SEP's advice).
            _ => ask(
                json!({"user_name": elicit("What is your name?", "name", "string")}),
                None,
            ),
        },
        "test_input_required_result_sampling" => match responses {
            Some(r) if r.contains_key("capital_question") => {
                let said = r["capital_question"]["content"]["text"]
                    .as_str()
                    .ok_or_else(|| {
                        McpError::invalid_params(
                            "inputResponses.capital_question is not a sampling result",
                            None,
                        )
                    })?;
                text(format!("The model said: {said}"))
            }
            _ => ask(
                json!({"capital_question": sample("What is the capital of France?", 100)}),
                None,
            ),
        },
        "test_input_required_result_list_roots" => match responses {
            Some(r) if r.contains_key("client_roots") => {
                let uris: Vec<&str> = r["client_roots"]["roots"]
                    .as_array()
                    .ok_or_else(|| {
                        McpError::invalid_params(
                            "inputResponses.client_roots is not a roots/list result",
                            None,
                        )
                    })?
                    .iter()
                    .filter_map(|root| root["uri"].as_str())
                    .collect();
                text(format!("Roots: {}", uris.join(", ")))
            }
            _ => ask(json!({"client_roots": roots()}), None),
        },
        "test_input_required_result_request_state"
        | "test_input_required_result_tampered_state" => {
            if !has_all(responses, &["confirm"]) {
                return ask(
                    json!({"confirm": elicit("Please confirm", "ok", "boolean")}),
                    Some(states.seal(&request.name)),
                );
            }
            if states.open(state)? != request.name {
                return Err(McpError::invalid_params(
                    "requestState belongs to another request",
                    None,
                ));
            }
            text("state-ok: the confirmation arrived with the state this server sealed".into())
        }
        "test_input_required_result_multiple_inputs" => {
            let keys = ["user_name", "greeting", "client_roots"];
            if !has_all(responses, &keys) {
                return ask(
                    json!({"user_name": elicit("What is your name?", "name", "string"),
                           "greeting": sample("Generate a greeting", 50),
                           "client_roots": roots()}),
                    Some(states.seal("multiple")),
                );
            }
            states.open(state)?;
            text("all three answers arrived".into())
        }
        "test_input_required_result_multi_round" => {
            if has_all(responses, &["step2"]) && states.open(state)? == "round2" {
                return text("both rounds answered".into());
            }
            if has_all(responses, &["step1"]) && states.open(state)? == "round1" {
                return ask(
                    json!({"step2": elicit("Step 2: What is your favorite color?", "color", "string")}),
                    Some(states.seal("round2")),
                );
            }
            ask(
                json!({"step1": elicit("Step 1: What is your name?", "name", "string")}),
                Some(states.seal("round1")),
            )
        }
        "test_input_required_result_capabilities" => {
            if responses.as_ref().is_some_and(|r| !r.is_empty()) {
                return text("the declared capabilities answered".into());
            }
            // What the client declared with this request (2026-07-28 carries it in `_meta`).
            let declared: ClientCapabilities = ctx.meta.client_capabilities().unwrap_or_default();
            let mut requests = serde_json::Map::new();
            if declared.sampling.is_some() {
                requests.insert("question".into(), sample("Say hello", 20));
            }
            if declared.elicitation.is_some() {
                requests.insert(
                    "name".into(),
                    elicit("What is your name?", "name", "string"),
                );
            }
            if declared.roots.is_some() {
                requests.insert("roots".into(), roots());
            }
            if requests.is_empty() {
                return text("the client declared nothing to ask it for".into());
            }
            ask(Value::Object(requests), None)
        }
        other => Err(McpError::invalid_params(
            format!("unknown tool '{other}'"),
            None,
        )),
    }
}

/// `prompts/get` for [`PROMPT`]: asks for the context, then gives the prompt.
pub fn prompt(request: &GetPromptRequestParams) -> Result<GetPromptResponse, McpError> {
    match &request.input_responses {
        Some(r) if r.contains_key("user_context") => {
            let context = answered(r, "user_context", "context")?;
            Ok(GetPromptResponse::Complete(complete_result(
                json!({"messages": [
                {"role": "user", "content": {"type": "text", "text": format!("Use this context: {context}")}}]}),
            )?))
        }
        _ => Ok(GetPromptResponse::InputRequired(input_required(
            json!({"user_context": elicit("What context should the prompt use?", "context", "string")}),
            None,
        )?)),
    }
}
