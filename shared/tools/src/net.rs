//! `fetch_url`: an HTTP GET or HEAD to a host the agent's grant lists.
//!
//! The ring's net provider refuses unlisted hosts before the request, at connect and at every
//! redirect; its refusal comes back as [`ToolError::Net`].

use std::time::Duration;

use l3m_core::effects::{EffectClass, Reversibility, ToolDecl};
use l3m_ring::effects::Granted;
use l3m_ring::net::{FetchMethod, FetchRequest};
use serde_json::{Value, json};

use crate::args::{Args, bad};
use crate::tool::{Tool, ToolError, ToolOutput, declare};

/// The largest body a call may ask for, and the default.
pub const MAX_FETCH_BYTES: usize = 1 << 20;

/// How long a fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(30);

/// Fetches a URL from a granted host and shows its status and text.
#[derive(Debug, Clone, Copy, Default)]
pub struct FetchUrl;

impl Tool for FetchUrl {
    fn decl(&self) -> ToolDecl {
        declare("fetch_url", [EffectClass::Net], Reversibility::Bounded)
    }

    fn description(&self) -> &str {
        "Fetch an http or https URL from a host your grant lists (GET, or HEAD for headers only). Shows the status, the final URL after redirects, the content type and the body if it is text (at most 1 MiB)."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": "an absolute http or https URL"},
                "method": {"type": "string", "enum": ["GET", "HEAD"], "description": "default GET"},
                "max_bytes": {"type": "integer", "minimum": 1, "maximum": MAX_FETCH_BYTES, "description": "the largest body accepted (default 1 MiB); a larger one is refused"}
            },
            "required": ["url"],
            "additionalProperties": false
        })
    }

    fn call(&self, input: Value, fx: &Granted<'_>) -> Result<ToolOutput, ToolError> {
        let args = Args::parse(&input, &self.input_schema())?;
        let method = match args.opt_string("method")?.unwrap_or("GET") {
            "GET" => FetchMethod::Get,
            "HEAD" => FetchMethod::Head,
            other => return Err(bad("method", format!("`{other}`: use GET or HEAD"))),
        };
        let request = FetchRequest {
            method,
            url: args.string("url")?.to_owned(),
            headers: Vec::new(),
            max_bytes: args
                .opt_count("max_bytes", MAX_FETCH_BYTES)?
                .unwrap_or(MAX_FETCH_BYTES),
            timeout: FETCH_TIMEOUT,
        };
        let response = fx.net()?.fetch(&request)?;
        let content_type = response
            .headers
            .iter()
            .find(|(name, _)| name == "content-type")
            .map_or("(none)", |(_, v)| v.as_str());
        let mut text = format!(
            "status {}\nurl {}\ncontent-type {content_type}\n",
            response.status, response.final_url
        );
        match String::from_utf8(response.body) {
            Ok(body) => {
                text.push('\n');
                text.push_str(&body);
            }
            Err(e) => text.push_str(&format!(
                "(body of {} bytes is not UTF-8 text; not shown)",
                e.as_bytes().len()
            )),
        }
        Ok(ToolOutput::text(text))
    }
}
