//! `l3m cards --serve`: the waiting cards as a small web page, answered with a form.
//!
//! Server-rendered HTML, no script. It listens on loopback unless the human binds it elsewhere,
//! and a request is served only when its `Host` is the address it listens on (so a page of
//! another site cannot reach it by rebinding a name). An answer is a form POST that must carry
//! the page's CSRF token (fresh at every start, from the OS's random source) and an `Origin`
//! that is this server's; anything else is refused with 403 and changes nothing. The answer
//! goes to hubd as the human's own session, exactly as `l3m card approve|deny`.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use l3m_core::names::{AgentName, Entity, HumanName};
use l3m_core::review::card::CardLine;
use l3m_wire::client::HubClient;

use crate::error::CliError;

/// What every request is checked against.
struct Web {
    client: HubClient,
    human: HumanName,
    token: String,
    /// `127.0.0.1:PORT`, as the `Host` header must say it.
    host: String,
}

/// Serves the page on `bind` until Ctrl-C; prints where on its first line.
pub async fn serve(client: HubClient, human: HumanName, bind: SocketAddr) -> Result<(), CliError> {
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .map_err(|e| CliError::Runtime(format!("cannot listen on {bind}: {e}")))?;
    let addr = listener
        .local_addr()
        .map_err(|e| CliError::Runtime(format!("the listener has no address: {e}")))?;
    let token = l3m_wire::credential::random_hex()
        .map_err(|e| CliError::Runtime(format!("the OS random source failed: {e}")))?;
    let web = Arc::new(Web {
        client,
        human,
        token,
        host: addr.to_string(),
    });
    let app = Router::new()
        .route("/", get(page))
        .route("/answer", post(answer))
        .with_state(web);
    outln!("serving the cards on http://{addr}/ (Ctrl-C stops)");
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(|e| CliError::Runtime(format!("serving the cards: {e}")))
}

fn refuse(why: &str) -> Response {
    (StatusCode::FORBIDDEN, format!("refused: {why}\n")).into_response()
}

/// Whether the request names this server as its host.
fn host_ok(web: &Web, headers: &HeaderMap) -> bool {
    headers.get(header::HOST).and_then(|h| h.to_str().ok()) == Some(web.host.as_str())
}

fn escape(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '&' => "&amp;".to_owned(),
            '<' => "&lt;".to_owned(),
            '>' => "&gt;".to_owned(),
            '"' => "&quot;".to_owned(),
            '\'' => "&#39;".to_owned(),
            c => c.to_string(),
        })
        .collect()
}

fn html(body: String) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
            ),
            (header::X_FRAME_OPTIONS, "DENY"),
        ],
        body,
    )
        .into_response()
}

async fn page(State(web): State<Arc<Web>>, headers: HeaderMap) -> Response {
    if !host_ok(&web, &headers) {
        return refuse("this page answers only at the address it listens on");
    }
    let cards = match super::cards::waiting_cards(&web.client).await {
        Ok(cards) => cards,
        Err(e) => return (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let mut body = String::from(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>l3m cards</title>\
         <style>body{font-family:sans-serif;margin:2em}section{border:1px solid #999;padding:1em;margin:1em 0}\
         code{background:#eee}</style></head><body><h1>Review cards waiting for you</h1>",
    );
    if cards.is_empty() {
        body.push_str("<p>No cards wait for you.</p>");
    }
    for (agent, card) in &cards {
        let CardLine::Raised {
            id,
            round,
            effect,
            justification,
            reason,
        } = card
        else {
            continue;
        };
        body.push_str(&format!(
            "<section><h2>{} of {} ({}, stalemate at round {round})</h2>\
             <p><b>Effect:</b> <code>{}</code></p><p><b>Writes only under:</b> {}</p>\
             <p><b>Justification:</b> {}</p><p><b>Reviewer:</b> {}</p>\
             <form method=\"post\" action=\"/answer\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
             <input type=\"hidden\" name=\"agent\" value=\"{}\">\
             <input type=\"hidden\" name=\"id\" value=\"{}\">\
             <label>Reason <input name=\"reason\"></label> \
             <button name=\"decision\" value=\"approve\">Approve</button> \
             <button name=\"decision\" value=\"deny\">Deny</button></form></section>",
            escape(id.as_str()),
            escape(agent.as_str()),
            escape(&effect.tool),
            escape(&effect.what),
            escape(&effect.write_roots.join(", ")),
            escape(justification),
            escape(reason),
            escape(&web.token),
            escape(agent.as_str()),
            escape(id.as_str()),
        ));
    }
    body.push_str("</body></html>");
    html(body)
}

async fn answer(State(web): State<Arc<Web>>, headers: HeaderMap, form: Bytes) -> Response {
    if !host_ok(&web, &headers) {
        return refuse("this page answers only at the address it listens on");
    }
    let origin = headers.get(header::ORIGIN).and_then(|h| h.to_str().ok());
    if origin != Some(format!("http://{}", web.host).as_str()) {
        return refuse("an answer must come from this page (its Origin did not match)");
    }
    let field = |name: &str| {
        url::form_urlencoded::parse(&form)
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    };
    let token_ok = field("csrf").is_some_and(|t| {
        t.len() == web.token.len()
            && t.bytes()
                .zip(web.token.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    });
    if !token_ok {
        return refuse("the form's CSRF token is missing or wrong; reload the page");
    }
    let (Some(agent), Some(id), Some(decision)) = (field("agent"), field("id"), field("decision"))
    else {
        return (
            StatusCode::BAD_REQUEST,
            "the form lacks agent, id or decision",
        )
            .into_response();
    };
    let Ok(agent) = AgentName::parse(&agent) else {
        return (StatusCode::BAD_REQUEST, "not an agent name").into_response();
    };
    let Ok(id) = l3m_core::log::ToolUseId::new(id) else {
        return (StatusCode::BAD_REQUEST, "not a card id").into_response();
    };
    let approve = match decision.as_str() {
        "approve" => true,
        "deny" => false,
        _ => return (StatusCode::BAD_REQUEST, "decision is approve or deny").into_response(),
    };
    let line = CardLine::Answered {
        id,
        by: Entity::Human(web.human.clone()),
        approve,
        reason: field("reason").unwrap_or_default(),
    };
    let Ok(text) = serde_json::to_string(&line) else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "encoding the answer").into_response();
    };
    match web.client.append_card(&agent, text).await {
        Ok(_) => (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response(),
        Err(e) => (StatusCode::CONFLICT, format!("hubd refused: {e}\n")).into_response(),
    }
}
