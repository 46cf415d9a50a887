//! An app's `Context1.RequestAccess`, with its `Response` listened for
//! before the request is made (a quick answer is not missed).

use std::time::Duration;

use contextd::client::proxy::Context1Proxy;
use futures_util::StreamExt;

/// A `RequestAccess` whose `Response` is listened for before it is made.
pub struct Asked {
    stream: zbus::MessageStream,
    /// The request's object path.
    pub path: String,
}

impl Asked {
    pub async fn new(conn: &zbus::Connection, cats: &[&str], reason: &str) -> Asked {
        let rule = zbus::MatchRule::builder()
            .msg_type(zbus::message::Type::Signal)
            .interface("org.contextd.Request1")
            .member("Response")
            .build()
            .expect("rule");
        let stream = zbus::MessageStream::for_match_rule(rule, conn, None)
            .await
            .expect("match");
        let path = Context1Proxy::new(conn)
            .await
            .expect("proxy")
            .request_access(cats, reason)
            .await
            .expect("RequestAccess")
            .to_string();
        Asked { stream, path }
    }

    /// The `Response` code (0 granted, 1 denied, 2 ended), within 40 s.
    pub async fn code(self) -> u32 {
        self.code_within(40).await
    }

    /// The `Response` code, within `secs`.
    pub async fn code_within(mut self, secs: u64) -> u32 {
        loop {
            let m = tokio::time::timeout(Duration::from_secs(secs), self.stream.next())
                .await
                .expect("Response in time")
                .expect("stream")
                .expect("message");
            if m.header().path().is_some_and(|p| p.as_str() == self.path) {
                let (code, _): (u32, contextd::client::proxy::Dict) =
                    m.body().deserialize().expect("body");
                return code;
            }
        }
    }
}
