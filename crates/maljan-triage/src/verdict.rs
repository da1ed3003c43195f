//! The report's verdict and the agent's part of a run: what the model said and did, the tokens
//! it took per stage and per model. maljan-agent fills these in; this crate only holds and renders
//! them, so a report reads the same whoever wrote it.

use serde::{Deserialize, Serialize};

/// STIX 2.1's malware-analysis result vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictWord {
    Malicious,
    Suspicious,
    Benign,
    Unknown,
}

impl VerdictWord {
    pub const ALL: [Self; 4] = [
        Self::Malicious,
        Self::Suspicious,
        Self::Benign,
        Self::Unknown,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Malicious => "malicious",
            Self::Suspicious => "suspicious",
            Self::Benign => "benign",
            Self::Unknown => "unknown",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|w| w.as_str() == s)
    }
}

/// Who gave the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictSource {
    /// The judge stage's model, its answer checked (shape, cited ids in the ledger).
    Agent,
    /// The deterministic scoring of the triage findings (maljan-agent's `heuristic`).
    Heuristic,
}

impl VerdictSource {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Agent => "agent",
            Self::Heuristic => "heuristic",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub verdict: VerdictWord,
    /// 0.0 – 1.0.
    pub confidence: f64,
    pub family: Option<String>,
    pub summary: String,
    pub claims: Vec<Claim>,
    pub techniques: Vec<Technique>,
    pub source: VerdictSource,
    /// The model that answered (`provider/model`), for an agent verdict.
    pub model: Option<String>,
    /// Why the agent's verdict is not the one shown, when a model was configured but its
    /// verdict could not be used.
    pub degradation: Option<String>,
    /// The facts the verdict rests on (maljan-agent's `facts` table): each named fact once, with
    /// its weight, whether it is strong, which way it leans and every evidence id that shows it.
    /// The heuristic verdict is computed from these; a model's verdict is checked against them.
    #[serde(default)]
    pub facts: Vec<Fact>,
    /// Set when a model's verdict contradicts the facts (malicious with no strong fact, benign
    /// against a strong one): the facts' own verdict and the disagreement, named. The model's
    /// verdict is still the one shown; this stands beside it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disagreement: Option<Disagreement>,
}

/// Which reading a fact supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Leaning {
    /// Speaks for a malicious reading (injection, persistence, a known-bad signature, …).
    Malicious,
    /// Speaks for a benign reading (a valid signature, a known installer layout, …).
    Benign,
    /// Describes the sample without leaning either way (packed, carries an archive, …); shown, and
    /// weighed only as the facts table says.
    Neutral,
}

/// One named fact about a sample, established by one or more tool findings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fact {
    /// Stable id from the facts table (`packed`, `carries_executable`, `process_injection`, …).
    pub id: String,
    /// What it means, for a person ("packed or protected").
    pub name: String,
    pub leaning: Leaning,
    /// Its weight in the score (counted once, however many findings show it).
    pub weight: u32,
    /// A strong fact is one ordinary software seldom shows; malicious needs two independent ones.
    pub strong: bool,
    /// The findings that show it, one line each ("yara_scan: rule Packer_UPX", "detect_packer: UPX").
    pub observations: Vec<String>,
    /// Every evidence id behind the observations (each in the job's ledger).
    pub evidence: Vec<String>,
    /// For a fact carried up from a child sample: the path to it (`a.zip → doc.docx → a.exe`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child: Option<String>,
}

/// A model's verdict that the facts do not support, shown beside the facts' verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Disagreement {
    /// What the facts alone conclude.
    pub facts_verdict: VerdictWord,
    /// What is contradicted, in a sentence ("the model says malicious, but no strong fact was found").
    pub reason: String,
}

/// One statement and the ledger evidence ids it rests on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Claim {
    pub text: String,
    pub evidence: Vec<String>,
}

/// A MITRE ATT&CK technique and the evidence for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Technique {
    pub id: String,
    pub name: String,
    pub evidence: Vec<String>,
}

/// What the agent stages did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct AgentReport {
    /// The model configured first (`provider/model`).
    pub model: String,
    pub stages: Vec<StageReport>,
    /// The model's messages and tool calls, and the tool results it read, in order.
    pub conversation: Vec<Turn>,
    /// Tokens per stage and model.
    pub usage: Vec<TokenUsage>,
    /// Tools the catalog did not offer the model, and why.
    pub withheld: Vec<WithheldTool>,
    /// Set when the run was cancelled (Ctrl-C): the report holds what was done until then.
    pub cancelled: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageReport {
    /// triage | analyst | judge
    pub name: String,
    /// complete | budget | failed | cancelled | skipped
    pub status: String,
    /// Why it ended other than by finishing (a budget, repeats, a provider failure, …).
    pub ended_because: Option<String>,
    /// Model requests made in the stage.
    pub requests: usize,
    /// Tool calls the model asked for (made, answered from the ledger, or refused).
    pub tool_calls: usize,
    pub duration_ms: f64,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// One entry of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    pub stage: String,
    /// assistant | tool | user
    pub role: String,
    /// The model's text, or what the tool result said (as the model read it, cut if it was).
    pub text: Option<String>,
    pub tool_calls: Vec<TurnCall>,
    /// For a tool result: the call's evidence id, when a call was made.
    pub evidence: Option<String>,
    /// For a tool result: the tool as the model named it.
    pub tool: Option<String>,
    /// Guards that acted (repeat answered from the ledger, arguments repaired, answer cut, …).
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnCall {
    pub id: String,
    pub name: String,
    /// The arguments as the model wrote them.
    pub arguments: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenUsage {
    pub stage: String,
    /// `provider/model`
    pub model: String,
    pub requests: usize,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WithheldTool {
    pub server: String,
    pub tool: String,
    pub reason: String,
}
