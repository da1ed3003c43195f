//! The MCP tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) on the server side: which
//! tools may run as a task ([`TaskSupport`]), and the store of one served server's tasks
//! ([`Tasks`]), built on rmcp's `TaskManager` (lifecycle, `tasks/get|update|cancel`, TTL sweep).
//!
//! SEP-2663 makes task creation server-directed: a client declares the extension (in its
//! per-request capabilities, or at initialize) and a tool that supports tasks then answers its
//! tools/call with a task handle, which the client polls with `tasks/get` (the result inlined once
//! it is done; there is no `tasks/result` or `tasks/list` in this revision). What this store adds
//! to rmcp's manager is what a server on a network needs:
//!
//! - **Ownership.** A task belongs to the HTTP session that created it (`Mcp-Session-Id`); another
//!   session asking for it is told the task does not exist, as for a guessed id. Stateless
//!   (2026-07-28) requests and stdio have no session: there the unguessable id (a v4 UUID) is
//!   the only handle, as the SEP describes for servers without an authorization context.
//! - **A bound.** At most [`TaskPolicy::max_tasks`] tasks (running or kept for their TTL) per
//!   owner. Beyond it a tool that merely allows tasks runs as an ordinary call (the server
//!   decides, and a client that declared tasks takes either answer); one that requires them is
//!   refused.
//! - **A TTL that outlives the call.** A task's TTL is its tool's timeout plus
//!   [`TaskPolicy::keep_result`], so a task is never expired while its tool may still finish,
//!   and its result stays readable for at least `keep_result` after that (rmcp keeps a finished
//!   task one more TTL window past its end, then drops it).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use rmcp::{
    ErrorData as McpError,
    model::{ClientCapabilities, GetTaskResult, Task},
    task_manager::{TaskContext, TaskFuture, TaskManager, TaskOptions},
};

pub use rmcp::model::TASKS_EXTENSION_ID;

/// Whether a tool's call may run as a task (SEP-2663's per-tool policy; the wire has no field for
/// it in this revision, the server decides).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TaskSupport {
    /// Always an ordinary call.
    #[default]
    Forbidden,
    /// A task for a client that declared the extension, an ordinary call for one that did not.
    Optional,
    /// Only as a task: a client that did not declare the extension is refused with -32021
    /// (Missing Required Client Capability).
    Required,
}

impl TaskSupport {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Forbidden => "forbidden",
            Self::Optional => "optional",
            Self::Required => "required",
        }
    }
}

/// A tool whose timeout is at least this long allows tasks unless its meta says otherwise: a
/// call that may take a minute outlasts what many hosts and proxies wait for one answer.
pub const LONG_TOOL: Duration = Duration::from_secs(60);

/// The limits of one served server's tasks.
#[derive(Debug, Clone)]
pub struct TaskPolicy {
    /// Tasks one owner (an HTTP session; or everyone, without sessions) may hold at once, running
    /// or finished and kept for their TTL.
    pub max_tasks: usize,
    /// How long a finished task's result stays readable, at least, past the tool's timeout.
    pub keep_result: Duration,
    /// What stands for the timeout of a tool that has none, in the TTL: such a task is expired
    /// (failed) once it has run this long.
    pub untimed_run: Duration,
    /// The polling interval suggested to clients.
    pub poll_interval: Duration,
}

impl Default for TaskPolicy {
    fn default() -> Self {
        Self {
            max_tasks: 64,
            keep_result: Duration::from_secs(300),
            untimed_run: Duration::from_secs(3600),
            poll_interval: Duration::from_millis(500),
        }
    }
}

impl TaskPolicy {
    /// The TTL of a task running a tool with this timeout.
    pub fn ttl_for(&self, timeout: Option<Duration>) -> Duration {
        timeout.unwrap_or(self.untimed_run) + self.keep_result
    }
}

/// Who a task belongs to: an HTTP session's id, or "" where there are no sessions.
pub type Owner = String;

/// One served server's tasks (shared by every session of an HTTP server; one per stdio process).
pub struct Tasks {
    manager: TaskManager,
    policy: TaskPolicy,
    /// Each live task's owner, by task id.
    owners: Mutex<HashMap<String, Owner>>,
}

impl Tasks {
    pub fn new(policy: TaskPolicy) -> Arc<Self> {
        Arc::new(Self {
            manager: TaskManager::new(),
            policy,
            owners: Mutex::new(HashMap::new()),
        })
    }

    pub fn policy(&self) -> &TaskPolicy {
        &self.policy
    }

    /// Starts `make`'s future as a task of `owner` with this TTL, or None when the owner already
    /// holds [`TaskPolicy::max_tasks`] tasks. The task answers `tasks/get` before this returns.
    pub fn spawn(
        &self,
        owner: &str,
        ttl: Duration,
        make: impl FnOnce(TaskContext) -> TaskFuture,
    ) -> Option<Task> {
        let mut owners = self.owners.lock().unwrap_or_else(|e| e.into_inner());
        // Forget the tasks rmcp has dropped (their TTL ran out), then count what is left.
        owners.retain(|id, _| self.manager.get_task(id).is_ok());
        if owners.values().filter(|o| *o == owner).count() >= self.policy.max_tasks {
            return None;
        }
        let options = TaskOptions::new()
            .with_ttl_ms(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1))
            .with_poll_interval_ms(
                u64::try_from(self.policy.poll_interval.as_millis())
                    .unwrap_or(1000)
                    .max(1),
            );
        let task = self.manager.spawn(options, make);
        owners.insert(task.task_id.clone(), owner.to_string());
        Some(task)
    }

    /// `tasks/get`: the task's state, its result or error inlined once it has ended.
    pub fn get(&self, owner: &str, task_id: &str) -> Result<GetTaskResult, McpError> {
        self.check_owner(owner, task_id)?;
        Ok(GetTaskResult::new(self.manager.get_task(task_id)?))
    }

    /// `tasks/update`: the client's answers to what the task asked for; unknown keys are ignored.
    pub fn update(
        &self,
        owner: &str,
        task_id: &str,
        responses: impl IntoIterator<Item = (String, serde_json::Value)>,
    ) -> Result<(), McpError> {
        self.check_owner(owner, task_id)?;
        self.manager.update_task(task_id, responses)
    }

    /// `tasks/cancel`: asks the task to stop (a maljan tool's cancellation token is cancelled at
    /// once); acknowledged whether or not it was still running.
    pub fn cancel(&self, owner: &str, task_id: &str) -> Result<(), McpError> {
        self.check_owner(owner, task_id)?;
        self.manager.cancel_task(task_id)
    }

    /// How many tasks are still running (for tests and metrics).
    pub fn running(&self) -> usize {
        self.manager.running_task_count()
    }

    /// Another owner's task is answered exactly as an unknown one, so an id cannot be probed.
    fn check_owner(&self, owner: &str, task_id: &str) -> Result<(), McpError> {
        let owners = self.owners.lock().unwrap_or_else(|e| e.into_inner());
        match owners.get(task_id) {
            Some(o) if o == owner => Ok(()),
            _ => Err(McpError::invalid_params(
                format!("unknown task: {task_id}"),
                None,
            )),
        }
    }
}

impl Drop for Tasks {
    /// Tasks end with the server that runs them.
    fn drop(&mut self) {
        self.manager.shutdown();
    }
}

/// The -32021 refusal of a call that needs the tasks extension the client did not declare, with
/// the capability it needs in `data.requiredCapabilities`.
pub fn tasks_required() -> McpError {
    McpError::missing_required_client_capability(
        ClientCapabilities::builder().enable_tasks().build(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::{
        model::{CallToolResult, ContentBlock, TaskStatus},
        task_manager::TaskExit,
    };

    fn done(text: &str) -> TaskFuture {
        let result = CallToolResult::success(vec![ContentBlock::text(text.to_string())]);
        Box::pin(async move { Ok(result) })
    }

    async fn settled(tasks: &Tasks, owner: &str, id: &str) -> GetTaskResult {
        loop {
            let got = tasks.get(owner, id).unwrap();
            if got.task.status().is_terminal() {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test]
    async fn a_task_is_its_owners_alone() {
        let tasks = Tasks::new(TaskPolicy::default());
        let task = tasks
            .spawn("session-a", Duration::from_secs(60), |_| done("a"))
            .unwrap();
        settled(&tasks, "session-a", &task.task_id).await;
        for refused in [
            tasks.get("session-b", &task.task_id).map(drop),
            tasks.cancel("session-b", &task.task_id),
            tasks.update("session-b", &task.task_id, []),
            tasks.get("", &task.task_id).map(drop),
        ] {
            let err = refused.unwrap_err();
            assert_eq!(err.code, rmcp::model::ErrorCode::INVALID_PARAMS);
            assert!(err.message.contains("unknown task"), "{}", err.message);
        }
    }

    #[tokio::test]
    async fn an_owner_holds_at_most_max_tasks_and_others_are_not_counted() {
        let policy = TaskPolicy {
            max_tasks: 2,
            ..TaskPolicy::default()
        };
        let tasks = Tasks::new(policy);
        let forever = || -> TaskFuture { Box::pin(std::future::pending()) };
        let ttl = Duration::from_secs(60);
        assert!(tasks.spawn("a", ttl, |_| forever()).is_some());
        assert!(tasks.spawn("a", ttl, |_| forever()).is_some());
        assert!(tasks.spawn("a", ttl, |_| forever()).is_none(), "third of a");
        assert!(tasks.spawn("b", ttl, |_| forever()).is_some());
        assert_eq!(tasks.running(), 3);
    }

    /// The TTL counts from creation: the result is readable until it has passed, and dropped
    /// (an unknown task, and no longer counted against the owner) once rmcp's retention has.
    #[tokio::test]
    async fn a_result_is_kept_for_its_ttl_then_dropped() {
        let policy = TaskPolicy {
            max_tasks: 1,
            ..TaskPolicy::default()
        };
        let tasks = Tasks::new(policy);
        let ttl = Duration::from_millis(1000);
        let task = tasks.spawn("", ttl, |_| done("kept")).unwrap();
        assert_eq!(task.ttl_ms, Some(1000));
        let got = settled(&tasks, "", &task.task_id).await;
        assert_eq!(got.task.status(), TaskStatus::Completed);
        // Ended, and still there with its result; it still counts against its owner.
        let again = tasks.get("", &task.task_id).unwrap();
        assert!(matches!(
            again.task.payload,
            rmcp::model::TaskPayload::Completed { .. }
        ));
        assert!(tasks.spawn("", ttl, |_| done("x")).is_none(), "still held");
        // Past its end plus one TTL window: gone, and its place is free again.
        tokio::time::sleep(Duration::from_millis(2100)).await;
        let gone = tasks.get("", &task.task_id).unwrap_err();
        assert_eq!(gone.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        assert!(tasks.spawn("", ttl, |_| done("y")).is_some());
    }

    #[tokio::test]
    async fn a_cancelled_task_settles_cancelled() {
        let tasks = Tasks::new(TaskPolicy::default());
        let task = tasks
            .spawn("", Duration::from_secs(60), |ctx| {
                Box::pin(async move {
                    ctx.cancelled().await;
                    Err(TaskExit::Cancelled)
                })
            })
            .unwrap();
        tasks.cancel("", &task.task_id).unwrap();
        let got = settled(&tasks, "", &task.task_id).await;
        assert_eq!(got.task.status(), TaskStatus::Cancelled);
        // Cancelling an ended task is acknowledged again (idempotent).
        tasks.cancel("", &task.task_id).unwrap();
    }

    #[test]
    fn the_ttl_outlives_the_tools_timeout() {
        let policy = TaskPolicy::default();
        assert_eq!(
            policy.ttl_for(Some(Duration::from_secs(600))),
            Duration::from_secs(900)
        );
        assert_eq!(policy.ttl_for(None), Duration::from_secs(3900));
    }
}
