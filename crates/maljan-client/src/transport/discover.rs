//! A server older than 2026-07-28 should refuse `server/discover` with an error, and rmcp then
//! falls back to `initialize` on the same connection. Some answer it with a success that is no
//! discover result (the conformance suite's servers answer `{}`), which rmcp takes as a failed
//! handshake. [`LegacyDiscoverReply`] wraps a transport and turns exactly that answer, to that
//! one request, into the "method not found" an older server should have sent, so the fallback
//! runs on every transport without a second connection.

use std::borrow::Cow;

use rmcp::{
    RoleClient,
    model::{ClientRequest, ErrorCode, ErrorData, JsonRpcError, JsonRpcMessage, ServerResult},
    service::{RxJsonRpcMessage, TxJsonRpcMessage},
    transport::Transport,
};

pub(crate) struct LegacyDiscoverReply<T> {
    inner: T,
    /// The id of the `server/discover` request whose answer is not yet in.
    discover_id: Option<rmcp::model::RequestId>,
}

impl<T> LegacyDiscoverReply<T> {
    pub(crate) fn new(inner: T) -> Self {
        Self {
            inner,
            discover_id: None,
        }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for LegacyDiscoverReply<T> {
    type Error = T::Error;

    fn name() -> Cow<'static, str> {
        T::name()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let JsonRpcMessage::Request(request) = &item
            && matches!(request.request, ClientRequest::DiscoverRequest(_))
        {
            self.discover_id = Some(request.id.clone());
        }
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = self.inner.receive().await?;
        Some(match message {
            JsonRpcMessage::Response(response)
                if self.discover_id.as_ref() == Some(&response.id) =>
            {
                self.discover_id = None;
                if matches!(response.result, ServerResult::DiscoverResult(_)) {
                    JsonRpcMessage::Response(response)
                } else {
                    tracing::debug!(
                        "server/discover answered with no discover result: an older server"
                    );
                    JsonRpcMessage::Error(JsonRpcError {
                        jsonrpc: response.jsonrpc,
                        id: Some(response.id),
                        error: ErrorData::new(
                            ErrorCode::METHOD_NOT_FOUND,
                            "server/discover answered with no discover result",
                            None,
                        ),
                    })
                }
            }
            JsonRpcMessage::Error(error) if error.id.is_some() && error.id == self.discover_id => {
                self.discover_id = None;
                JsonRpcMessage::Error(error)
            }
            other => other,
        })
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{DiscoverRequest, DiscoverRequestParams, JsonRpcResponse, RequestId};
    use tokio::sync::mpsc;

    /// A transport that records what is sent and replays scripted answers.
    struct Scripted {
        answers: mpsc::UnboundedReceiver<RxJsonRpcMessage<RoleClient>>,
    }

    impl Transport<RoleClient> for Scripted {
        type Error = std::io::Error;
        fn send(
            &mut self,
            _item: TxJsonRpcMessage<RoleClient>,
        ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
            std::future::ready(Ok(()))
        }
        async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
            self.answers.recv().await
        }
        async fn close(&mut self) -> Result<(), Self::Error> {
            Ok(())
        }
    }

    fn empty_answer(id: i64) -> RxJsonRpcMessage<RoleClient> {
        JsonRpcMessage::Response(JsonRpcResponse {
            jsonrpc: Default::default(),
            id: RequestId::Number(id),
            result: ServerResult::EmptyResult(rmcp::model::EmptyResult {}),
        })
    }

    fn discover(id: i64) -> TxJsonRpcMessage<RoleClient> {
        JsonRpcMessage::request(
            ClientRequest::DiscoverRequest(DiscoverRequest::new(DiscoverRequestParams {})),
            RequestId::Number(id),
        )
    }

    #[tokio::test]
    async fn an_empty_answer_to_discover_becomes_method_not_found_and_nothing_else_changes() {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut t = LegacyDiscoverReply::new(Scripted { answers: rx });
        t.send(discover(7)).await.unwrap();
        tx.send(empty_answer(6)).unwrap();
        tx.send(empty_answer(7)).unwrap();
        tx.send(empty_answer(7)).unwrap();
        assert!(matches!(
            t.receive().await,
            Some(JsonRpcMessage::Response(_))
        ));
        match t.receive().await {
            Some(JsonRpcMessage::Error(e)) => {
                assert_eq!(e.id, Some(RequestId::Number(7)));
                assert_eq!(e.error.code, ErrorCode::METHOD_NOT_FOUND);
            }
            other => panic!("expected an error, got {other:?}"),
        }
        // Only the first answer to that one request is rewritten.
        assert!(matches!(
            t.receive().await,
            Some(JsonRpcMessage::Response(_))
        ));
    }
}
