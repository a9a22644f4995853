//! The system prompt, assembled at boot: the persona, the harness's account, the instructions.
//!
//! Pure: the caller reads the persona's files and the grant; this module only arranges them, so
//! the same inputs always give the same text, and a later boot journals a new prompt only if
//! the text changed.
//!
//! # Layout
//! - [`Persona`]: the four files a persona may hold.
//! - [`assemble`]: the prompt.

use l3m_core::budget::Fuel;
use l3m_core::grant::Grant;
use l3m_core::names::AgentName;

/// The files of the agent's persona worktree, each `None` if absent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Persona {
    /// `instructions.md`.
    pub instructions: Option<String>,
    /// `personality.md`.
    pub personality: Option<String>,
    /// `memories.md`.
    pub memories: Option<String>,
    /// `system.md`: operating instructions replacing the default.
    pub system: Option<String>,
}

/// The operating instructions used when the persona has no `system.md`.
pub const DEFAULT_OPERATING: &str = "\
Work in small steps. Use the tools offered to read and change files under your write roots; \
every file edit is journaled and can be undone. Lines beginning with (l3m) are the harness \
speaking: letters that arrived, results of interrupted tools, changes to your grant or budget. \
When you have nothing more to do, answer without using a tool and your turn ends.";

/// The system prompt for `agent`, offered `tools`; `images` are the container images the hub
/// pins, named when a build or run tool is offered (empty otherwise).
pub fn assemble(
    agent: &AgentName,
    persona: &Persona,
    grant: &Grant,
    fuel: &Fuel,
    tools: &[&str],
    images: &[String],
) -> String {
    let mut out = String::new();
    for (title, file) in [
        ("Instructions", &persona.instructions),
        ("Personality", &persona.personality),
        ("Memories", &persona.memories),
    ] {
        if let Some(text) = file.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
            out.push_str(&format!("# {title}\n{text}\n\n"));
        }
    }
    out.push_str(&format!(
        "# l3m\nYou are the agent {agent} in l3m, a runtime where many agents cooperate under \
         authority fixed by their parents and humans. Your Log records every fact of your \
         sessions; what you see is a fold over it. Nothing you write can widen what you may \
         affect.\n\n# What you may do\n"
    ));
    out.push_str(&render_grant(grant));
    out.push_str(&format!("Fuel left: {fuel}.\n"));
    if tools.is_empty() {
        out.push_str("Tools offered: none.\n");
    } else {
        out.push_str(&format!("Tools offered: {}.\n", tools.join(", ")));
    }
    if !images.is_empty() {
        out.push_str(&format!(
            "Container images the hub pins (name one as `image`): {}.\n",
            images.join(", ")
        ));
    }
    out.push('\n');
    out.push_str("# Operating instructions\n");
    let operating = persona
        .system
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .unwrap_or(DEFAULT_OPERATING);
    out.push_str(operating);
    out.push('\n');
    out
}

/// The axes the grant confers, one line each in the grant's own spelling. What it does not
/// confer is left out: the tools offered already follow the grant, and a list of what the
/// agent may not do is text the model reads every call to no use.
fn render_grant(grant: &Grant) -> String {
    let value = serde_json::to_value(grant).unwrap_or(serde_json::Value::Null);
    let Some(axes) = value.as_object() else {
        return "Grant: unreadable.\n".to_owned();
    };
    let mut out = String::new();
    for (axis, v) in axes {
        let shown = match v {
            serde_json::Value::Array(a) if a.is_empty() => continue,
            serde_json::Value::Object(o) if o.is_empty() => continue,
            serde_json::Value::Null | serde_json::Value::Bool(false) => continue,
            serde_json::Value::String(s) if s == "off" => continue,
            serde_json::Value::Bool(true) => "conferred".to_owned(),
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        out.push_str(&format!("- {axis}: {shown}\n"));
    }
    if out.is_empty() {
        out.push_str("- nothing beyond reading your context root\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_holds_persona_grant_fuel_tools_and_the_instructions() {
        let agent = AgentName::parse("demo").unwrap();
        let persona = Persona {
            instructions: Some("Be a librarian.".into()),
            system: Some("Only ever answer in haiku.".into()),
            ..Persona::default()
        };
        let grant: Grant = toml::from_str("files = [\"workspace\"]").unwrap();
        let fuel = Fuel {
            model_calls: 4,
            bytes: 10,
            wakes: 0,
        };
        let text = assemble(&agent, &persona, &grant, &fuel, &["read_file", "now"], &[]);
        assert!(
            text.starts_with("# Instructions\nBe a librarian."),
            "{text}"
        );
        assert!(!text.contains("# Personality"));
        assert!(text.contains("- files: [\"workspace\"]"), "{text}");
        assert!(
            !text.contains("- net:"),
            "what is not conferred is not listed: {text}"
        );
        assert!(!text.contains("not conferred"), "{text}");
        assert!(text.contains("Fuel left: 4 calls, 10 bytes, 0 wakes."));
        assert!(text.contains("Tools offered: read_file, now.\n\n# Operating"));
        assert!(!text.contains("Container images"));
        assert!(text.ends_with("Only ever answer in haiku.\n"));
        assert!(!text.contains(DEFAULT_OPERATING));
        assert_eq!(
            text,
            assemble(&agent, &persona, &grant, &fuel, &["read_file", "now"], &[])
        );
        let images = ["sha256:ab".to_owned(), "sha256:cd".to_owned()];
        let text = assemble(&agent, &persona, &grant, &fuel, &["build"], &images);
        assert!(
            text.contains(
                "Tools offered: build.\nContainer images the hub pins (name one as `image`): \
                 sha256:ab, sha256:cd.\n\n# Operating"
            ),
            "{text}"
        );
    }
}
