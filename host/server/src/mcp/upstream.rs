//! Code mode: the tools of upstream MCP servers, as functions inside the sandbox.
//!
//! `sandlot mcp --upstream time=mcp-server-time` connects to each upstream server (a
//! command spoken to over its standard input and output, or a streamable-HTTP URL on
//! a loopback address), lists its tools, and makes each a [`Tool`] of every session
//! the server opens, named `SERVER_TOOL` (`time_get_current_time`). A model then
//! writes one program that calls them — in loops, side by side, filtering what comes
//! back — through `execute_code`, whose description lists them with their
//! signatures, instead of spending a turn on each call.
//!
//! The upstream servers run with the server's rights, outside any sandbox: they are
//! the operator's choice, as any tool's handler is. Sandboxed code reaches them only
//! through tool calls, checked against each tool's schema and held to the session's
//! tool limits. What a tool gives back reaches the code, so a server started here
//! sees none of sandlot's own environment (its clients' API tokens, the operator's
//! secrets, whatever the shell held): only [`BASELINE_ENV`] and what the operator
//! hands it by name ([`Upstream::env`]).

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use sandlot_core::error::Error;
use sandlot_core::tool::{Tool, ToolError, ToolSet};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// The variables of sandlot's environment a command upstream server starts with,
/// where sandlot has them: what finds programs, names the user's home, the locale,
/// the time zone, the temporary directory and the system's certificates. None of
/// them carries a credential; anything else it needs, the operator gives it by name
/// ([`Upstream::env`]).
pub const BASELINE_ENV: [&str; 9] = [
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
];

/// One upstream MCP server: a name (the prefix of its tools' names) and where it is.
#[derive(Clone, PartialEq, Eq)]
pub struct Upstream {
    /// An identifier: its tools are called `NAME_TOOL` in the sandbox.
    pub name: String,
    /// How to reach it.
    pub endpoint: UpstreamEndpoint,
    /// Environment variables a command server gets on top of [`BASELINE_ENV`]; it
    /// gets nothing else of sandlot's environment. Its `Debug` form shows the names
    /// only: a value may be a key.
    pub env: BTreeMap<String, String>,
}

impl fmt::Debug for Upstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Upstream")
            .field("name", &self.name)
            .field("endpoint", &self.endpoint)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Where an upstream server is.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum UpstreamEndpoint {
    /// A program and its arguments, started by the server and spoken to over its
    /// standard input and output.
    Command(Vec<String>),
    /// A streamable-HTTP endpoint on a loopback address, e.g.
    /// `http://127.0.0.1:3001/mcp`.
    Url(String),
}

impl FromStr for Upstream {
    type Err = Error;

    /// `NAME=COMMAND ARGS...` or `NAME=http://127.0.0.1:PORT/PATH`.
    ///
    /// ```
    /// use sandlot::server::mcp::upstream::{Upstream, UpstreamEndpoint};
    /// let time: Upstream = "time=mcp-server-time --local-timezone UTC".parse().unwrap();
    /// assert_eq!(time.name, "time");
    /// assert_eq!(
    ///     time.endpoint,
    ///     UpstreamEndpoint::Command(vec!["mcp-server-time".into(), "--local-timezone".into(), "UTC".into()])
    /// );
    /// assert!("docs=https://example.com/mcp".parse::<Upstream>().is_err());
    /// ```
    fn from_str(text: &str) -> Result<Upstream, Error> {
        let invalid = |reason: String| Error::InvalidRequest {
            reason: format!("upstream `{text}`: {reason}"),
        };
        let Some((name, target)) = text.split_once('=') else {
            return Err(invalid(
                "write NAME=COMMAND or NAME=URL, e.g. time=mcp-server-time".into(),
            ));
        };
        let endpoint = if target.starts_with("http://") || target.starts_with("https://") {
            UpstreamEndpoint::Url(target.to_string())
        } else {
            UpstreamEndpoint::Command(target.split_whitespace().map(str::to_string).collect())
        };
        Upstream::new(name.trim(), endpoint).map_err(|e| match e {
            Error::InvalidRequest { reason } => invalid(reason),
            other => other,
        })
    }
}

impl Upstream {
    /// An upstream server named `name` at `endpoint`. Errors: a name that is not an
    /// identifier, an empty command, a URL off the loopback interface.
    pub fn new(name: &str, endpoint: UpstreamEndpoint) -> Result<Upstream, Error> {
        let invalid = |reason: String| Error::InvalidRequest { reason };
        let identifier = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && name.len() <= 32;
        if !identifier {
            return Err(invalid(format!(
                "`{name}` is not a name for an upstream server: a letter, then letters, \
                 digits or `_`, at most 32 (it prefixes its tools' names)"
            )));
        }
        match &endpoint {
            UpstreamEndpoint::Command(argv) if argv.is_empty() => {
                return Err(invalid(format!("upstream {name} names no command")))
            }
            UpstreamEndpoint::Url(url) if !on_loopback(url) => {
                return Err(invalid(format!(
                    "{url} is not on a loopback address: an upstream server is reached \
                     with the server's rights, so only 127.0.0.1, ::1 or localhost"
                )))
            }
            _ => {}
        }
        Ok(Upstream {
            name: name.to_string(),
            endpoint,
            env: BTreeMap::new(),
        })
    }

    /// The same server, started with `env` on top of [`BASELINE_ENV`]. Errors: a
    /// variable of a URL server (it is not started here), a name that is no
    /// variable's.
    ///
    /// ```
    /// use sandlot::server::mcp::upstream::Upstream;
    /// let github: Upstream = "github=github-mcp-server stdio".parse().unwrap();
    /// let github = github
    ///     .with_env([("GITHUB_TOKEN".to_string(), "ghp_example".to_string())].into())
    ///     .unwrap();
    /// assert_eq!(github.env["GITHUB_TOKEN"], "ghp_example");
    /// assert!(format!("{github:?}").contains("GITHUB_TOKEN"));
    /// assert!(!format!("{github:?}").contains("ghp_example"));
    /// ```
    pub fn with_env(mut self, env: BTreeMap<String, String>) -> Result<Upstream, Error> {
        let invalid = |reason: String| Error::InvalidRequest {
            reason: format!("upstream {}: {reason}", self.name),
        };
        if !env.is_empty() && matches!(self.endpoint, UpstreamEndpoint::Url(_)) {
            return Err(invalid(
                "a server reached by URL is not started by sandlot, so it takes no \
                 environment: set it where that server starts"
                    .into(),
            ));
        }
        for (name, value) in &env {
            let variable = !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !variable {
                return Err(invalid(format!(
                    "`{name}` is not an environment variable's name: letters, digits and \
                     _, not starting with a digit"
                )));
            }
            if value.contains('\0') {
                return Err(invalid(format!("the value of {name} holds a NUL byte")));
            }
        }
        self.env = env;
        Ok(self)
    }
}

impl fmt::Display for Upstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.endpoint {
            UpstreamEndpoint::Command(argv) => write!(f, "{}={}", self.name, argv.join(" ")),
            UpstreamEndpoint::Url(url) => write!(f, "{}={url}", self.name),
        }
    }
}

/// Whether `url`'s host is a loopback address.
fn on_loopback(url: &str) -> bool {
    let Some(rest) = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
    else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return false;
    }
    let host = match authority.strip_prefix('[') {
        Some(bracketed) => bracketed.split(']').next().unwrap_or_default(),
        None => authority.split(':').next().unwrap_or_default(),
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

type Client = RunningService<RoleClient, ()>;

/// Connected upstream servers and the tools they give the sandbox. Dropping it
/// disconnects them (and stops those it started).
pub struct Upstreams {
    tools: ToolSet,
    clients: Vec<Arc<Client>>,
}

impl fmt::Debug for Upstreams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Upstreams")
            .field("tools", &self.tools.len())
            .field("servers", &self.clients.len())
            .finish()
    }
}

impl Upstreams {
    /// Connects to every server of `upstreams` and lists its tools; fails, naming the
    /// server, if one cannot be started, reached or listed.
    pub async fn connect(upstreams: &[Upstream]) -> Result<Upstreams, Error> {
        let mut tools = ToolSet::new();
        let mut clients = Vec::new();
        for upstream in upstreams {
            let failed = |what: &str, e: &dyn fmt::Display| Error::Serve {
                reason: format!("upstream MCP server {upstream}: {what}: {e}"),
            };
            let client = match &upstream.endpoint {
                UpstreamEndpoint::Command(argv) => {
                    let mut command = tokio::process::Command::new(&argv[0]);
                    command.args(&argv[1..]).env_clear();
                    for name in BASELINE_ENV {
                        if let Some(value) = std::env::var_os(name) {
                            command.env(name, value);
                        }
                    }
                    command.envs(&upstream.env);
                    let transport = TokioChildProcess::new(command)
                        .map_err(|e| failed("cannot start it", &e))?;
                    ().serve(transport)
                        .await
                        .map_err(|e| failed("it did not initialize", &e))?
                }
                UpstreamEndpoint::Url(url) => ()
                    .serve(StreamableHttpClientTransport::from_uri(url.as_str()))
                    .await
                    .map_err(|e| failed("it did not initialize", &e))?,
            };
            let client = Arc::new(client);
            let listed = client
                .list_all_tools()
                .await
                .map_err(|e| failed("it did not list its tools", &e))?;
            for tool in listed {
                let name = format!("{}_{}", upstream.name, identifier(&tool.name));
                let schema = Value::Object(tool.input_schema.as_ref().clone());
                let description = tool.description.as_deref().unwrap_or_default();
                let called = tool.name.to_string();
                let peer = client.clone();
                let made = Tool::new_async(&name, description, schema, move |arguments| {
                    let (peer, called) = (peer.clone(), called.clone());
                    Box::pin(async move { call(&peer, called, arguments).await })
                })
                .and_then(|made| tools.add(made));
                // One tool sandlot cannot take (a schema it refuses, a name another
                // already has) is left out; the server's other tools still serve.
                if let Err(error) = made {
                    tracing::warn!(upstream = %upstream, tool = %tool.name, %error, "tool left out");
                }
            }
            clients.push(client);
        }
        Ok(Upstreams { tools, clients })
    }

    /// The tools of every upstream server.
    pub fn tools(&self) -> &ToolSet {
        &self.tools
    }

    /// Disconnects from every server.
    pub async fn close(self) {
        for client in self.clients {
            if let Ok(client) = Arc::try_unwrap(client) {
                let _ = client.cancel().await;
            }
        }
    }
}

/// `name` with every character that cannot be in an identifier made `_`.
fn identifier(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// Calls `tool` upstream; its result as JSON for the code: the structured content
/// when there is some, else the text (parsed when it is JSON), else the content
/// blocks.
async fn call(peer: &Client, tool: String, arguments: Value) -> Result<Value, ToolError> {
    let Value::Object(arguments) = arguments else {
        return Err(ToolError::new("the arguments are not an object"));
    };
    let result = peer
        .call_tool(CallToolRequestParams::new(tool).with_arguments(arguments))
        .await
        .map_err(|e| ToolError::new(format!("the upstream server failed: {e}")))?;
    value_of(result)
}

fn value_of(result: CallToolResult) -> Result<Value, ToolError> {
    let texts: Vec<&str> = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect();
    if result.is_error == Some(true) {
        return Err(ToolError::new(texts.join("\n")));
    }
    if let Some(structured) = result.structured_content {
        return Ok(structured);
    }
    if texts.len() == result.content.len() {
        let text = texts.join("\n");
        return Ok(serde_json::from_str(&text).unwrap_or(Value::String(text)));
    }
    Ok(json!(result.content))
}

/// What `execute_code` adds to its description for these tools: how to call them,
/// and each one's signature and description.
pub(crate) fn describe(tools: &ToolSet) -> String {
    let mut text = String::from(
        "\n\nThe code can call these tools itself, as functions, in loops and side by side \
         (one program instead of a call per turn; only what it prints comes back). Python: \
         `from sandlot_tools import NAME`, then `NAME(arg=...)`, which returns the tool's \
         value and raises sandlot_tools.ToolError when it fails. Other languages in \
         containers: `sandlot-tool NAME '{\"arg\": ...}'` prints the value as JSON.",
    );
    for tool in tools.iter() {
        let schema = tool.input_schema();
        let required: Vec<&str> = schema["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let arguments: Vec<String> = schema["properties"]
            .as_object()
            .map(|properties| {
                properties
                    .iter()
                    .map(|(name, property)| {
                        let kind = property["type"].as_str().unwrap_or("any");
                        let optional = if required.contains(&name.as_str()) {
                            ""
                        } else {
                            " = None"
                        };
                        format!("{name}: {kind}{optional}")
                    })
                    .collect()
            })
            .unwrap_or_default();
        let summary = tool.description().lines().next().unwrap_or_default();
        text.push_str(&format!(
            "\n- {}({}): {summary}",
            tool.name().as_str(),
            arguments.join(", ")
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstreams_are_named_and_kept_on_loopback() {
        let http: Upstream = "docs=http://127.0.0.1:3001/mcp".parse().unwrap();
        assert_eq!(
            http.endpoint,
            UpstreamEndpoint::Url("http://127.0.0.1:3001/mcp".into())
        );
        assert!("v6=http://[::1]:80/mcp".parse::<Upstream>().is_ok());
        assert!("local=http://localhost:80".parse::<Upstream>().is_ok());
        for bad in [
            "no-equals",
            "bad-name=x",
            "1st=x",
            "empty=",
            "far=http://10.0.0.1/mcp",
            "sneaky=http://127.0.0.1@evil.example/mcp",
        ] {
            let error = bad.parse::<Upstream>().unwrap_err().to_string();
            assert!(error.contains(bad.split('=').next().unwrap()), "{error}");
        }
        assert_eq!(identifier("get-sum.v2"), "get_sum_v2");
    }

    #[test]
    fn a_result_becomes_the_value_the_code_gets() {
        use rmcp::model::ContentBlock;
        let text = CallToolResult::success(vec![ContentBlock::text("{\"a\": 1}")]);
        assert_eq!(value_of(text).unwrap(), json!({"a": 1}));
        let plain = CallToolResult::success(vec![ContentBlock::text("Echo: hi")]);
        assert_eq!(value_of(plain).unwrap(), json!("Echo: hi"));
        let failed = CallToolResult::error(vec![ContentBlock::text("no such zone")]);
        assert_eq!(value_of(failed).unwrap_err().message(), "no such zone");
    }
}
