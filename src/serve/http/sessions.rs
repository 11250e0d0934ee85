//! Sessions: the cap on live sessions, their idle time, and what the front reads of a request
//! to know whether it opens one.

use std::time::Duration;

use serde_json::Value;

/// The most sessions alive at once (`503` for an `initialize` beyond).
pub const MAX_SESSIONS: usize = 64;
/// A session without any request for this long is ended, with its runs and jobs.
pub const SESSION_IDLE: Duration = Duration::from_secs(30 * 60);
/// The environment variable that shortens [`SESSION_IDLE`] (milliseconds), for the tests.
const IDLE_ENV: &str = "CONFINE_HTTP_IDLE_MS";

tokio::task_local! {
    /// Set while rmcp handles an `initialize`: the service factory then builds a registry of
    /// the session's own instead of handing out the shared one.
    pub(super) static OPENS_SESSION: bool;
}

/// The idle time of a session: [`SESSION_IDLE`] unless the tests shorten it.
pub(super) fn session_idle() -> Duration {
    std::env::var(IDLE_ENV)
        .ok()
        .and_then(|ms| ms.parse::<u64>().ok())
        .filter(|&ms| ms > 0)
        .map_or(SESSION_IDLE, Duration::from_millis)
}

/// What the front needs of a POST's JSON-RPC message: its method, its id (a string or a
/// number), and whether its `params._meta` carries the stateless form's per-request protocol
/// version.
#[derive(Default)]
pub(super) struct Peek {
    pub(super) method: Option<String>,
    pub(super) id: Option<Value>,
    pub(super) stateless_version: bool,
}

impl Peek {
    /// Read `body` once without building its tree: unknown members (a call's arguments, a
    /// write's content) are skipped, not copied. A body this reading refuses (not one JSON
    /// object, a member of the wrong type, a duplicate member) is read again as a whole
    /// `Value`, so that every body is classified exactly as a `Value` would classify it.
    pub(super) fn of(body: &[u8]) -> Peek {
        use serde::de::IgnoredAny;
        use std::borrow::Cow;

        #[derive(serde::Deserialize)]
        struct Message<'a> {
            #[serde(borrow, default)]
            method: Option<Cow<'a, str>>,
            #[serde(default)]
            id: Option<Value>,
            #[serde(default)]
            params: Option<Params>,
        }
        #[derive(serde::Deserialize)]
        struct Params {
            #[serde(rename = "_meta", default)]
            meta: Option<Meta>,
        }
        #[derive(serde::Deserialize)]
        struct Meta {
            #[serde(rename = "io.modelcontextprotocol/protocolVersion", default)]
            version: Present,
        }
        /// Whether a member is there, whatever its value (`null` included), read without
        /// keeping it.
        #[derive(Default)]
        struct Present(bool);
        impl<'de> serde::Deserialize<'de> for Present {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Present, D::Error> {
                IgnoredAny::deserialize(d).map(|_| Present(true))
            }
        }

        let id_of = |id: Option<Value>| id.filter(|id| id.is_string() || id.is_number());
        if let Ok(m) = serde_json::from_slice::<Message<'_>>(body) {
            return Peek {
                method: m.method.map(Cow::into_owned),
                id: id_of(m.id),
                stateless_version: m
                    .params
                    .and_then(|p| p.meta)
                    .is_some_and(|meta| meta.version.0),
            };
        }
        let Ok(m) = serde_json::from_slice::<Value>(body) else {
            return Peek::default();
        };
        Peek {
            method: m["method"].as_str().map(str::to_owned),
            id: id_of(m.get("id").cloned()),
            stateless_version: m["params"]["_meta"]
                .get("io.modelcontextprotocol/protocolVersion")
                .is_some(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peek_classifies_every_body_as_a_whole_value_would() {
        let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}"#;
        let bodies = [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#.to_owned(),
            format!(r#"{{"jsonrpc":"2.0","id":"a","method":"initialize","params":{{{meta}}}}}"#),
            format!(r#"{{"params":{{{meta}}},"method":"initialize","id":2}}"#),
            r#"{"id":3,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"a","content":"x
y"}}}"#.to_owned(),
            r#"{"id":null,"method":"tools/list"}"#.to_owned(),
            r#"{"id":[1],"method":"tools/list"}"#.to_owned(),
            r#"{"id":1.5,"method":7}"#.to_owned(),
            r#"{"method":"notifications/initialized"}"#.to_owned(),
            // Duplicates: a whole `Value` keeps the last; so does the peek.
            r#"{"method":"ping","method":"initialize","id":4}"#.to_owned(),
            r#"{"id":4,"id":"x","method":"ping"}"#.to_owned(),
            format!(r#"{{"method":"initialize","id":5,"params":{{{meta},"_meta":{{}}}}}}"#),
            r#"{"method":"initialize","id":6,"params":7}"#.to_owned(),
            r#"{"method":"initialize","id":6,"params":{"_meta":null}}"#.to_owned(),
            r#"{"method":"initialize","id":6,"params":{"_meta":{"io.modelcontextprotocol/protocolVersion":null}}}"#.to_owned(),
            r#"{"method":null,"id":6,"params":null}"#.to_owned(),
            r#"[{"method":"initialize","id":7}]"#.to_owned(),
            "not json".to_owned(),
            String::new(),
        ];
        for body in &bodies {
            let peek = Peek::of(body.as_bytes());
            let whole = serde_json::from_slice::<Value>(body.as_bytes()).ok();
            let method = whole.as_ref().and_then(|m| m["method"].as_str());
            let id = whole
                .as_ref()
                .and_then(|m| m.get("id"))
                .filter(|id| id.is_string() || id.is_number());
            let stateless = whole.as_ref().is_some_and(|m| {
                m["params"]["_meta"]
                    .get("io.modelcontextprotocol/protocolVersion")
                    .is_some()
            });
            assert_eq!(peek.method.as_deref(), method, "{body}");
            assert_eq!(peek.id.as_ref(), id, "{body}");
            assert_eq!(peek.stateless_version, stateless, "{body}");
        }
    }
}
