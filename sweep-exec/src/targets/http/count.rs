//! What the client decides about a finished request when the server said less than it should:
//! token counts without a `usage` chunk, and a dropped stream that was a context overflow.

use engine_server::tokenize::template::Piece;
use engine_server::tokenize::{ChatMessage, ChatOptions, Role, TemplateFamily};

use super::HttpTarget;
use super::stream::Uncounted;
use crate::prompt::TurnPrompt;
use crate::records::Record;
use crate::workload::{Failure, RequestSpec};

/// The prompt's tokens as a server with `family`'s chat template counts them: the synthesized
/// content (the trace's tokens and the marker) plus the template's marker tokens (begin of
/// sentence, role markers, the generation prompt); text a template adds besides (ChatML's role
/// names) is not counted.
pub fn templated_prompt_tokens(prompt: &TurnPrompt, family: TemplateFamily) -> u64 {
    let markers = |pieces: Vec<Piece<'_>>| pieces.iter().filter(|p| matches!(p, Piece::Marker(_))).count() as u64;
    let opts = ChatOptions::default();
    let ids = prompt.conversation.block_ids(prompt.turn as usize);
    let mut n = markers(family.prefix(&opts)) + markers(family.generation_prompt(&opts));
    for m in prompt.message_plans(&ids) {
        let role = match m.role {
            crate::prompt::Role::System => Role::System,
            crate::prompt::Role::User => Role::User,
            crate::prompt::Role::Assistant => Role::Assistant,
        };
        n += markers(family.message(&ChatMessage::new(role, String::new())));
    }
    prompt.total_tokens() + n
}

/// Tokens a chat template and role markers add to a prompt that the client cannot see: a
/// dropped stream whose synthesized prompt comes this close to the context counts as overflow.
const TEMPLATE_SLACK: u64 = 256;

impl HttpTarget {
    /// The server sends `usage`: later replies need not keep their text.
    pub(super) fn note_usage(&self) {
        self.usage_seen.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Token counts of a reply the server sent none for: a `length` finish generated exactly
    /// the budget sent (`budget`); otherwise the streamed text is tokenized with the server's
    /// tokenizer (`tokenized`). Inputs are the synthesized prompt's tokens. Without a tokenizer
    /// (or the text) the counts stay unknown, and the point is then not valid.
    pub fn count_tokens(&self, spec: &RequestSpec, rec: &mut Record, u: Uncounted) {
        let counted = if u.length_finish {
            Some((spec.max_tokens, "budget"))
        } else {
            match (u.text, &self.counter) {
                (Some(text), Some(tok)) => tok.encode(&text).ok().map(|ids| (ids.len() as u64, "tokenized")),
                _ => None,
            }
        };
        if let Some((n, source)) = counted {
            rec.output_tokens = Some(n);
            rec.input_tokens = Some(templated_prompt_tokens(&spec.prompt, TemplateFamily::for_model(&self.model)));
            rec.token_source = Some(source.into());
        }
    }

    /// A stream the server dropped (or ended with an error that does not say why) for a prompt
    /// that cannot fit the server's context is a context overflow, terminal for its
    /// conversation as AgentX defines it (llama.cpp drops the stream after its headers).
    pub fn classify_overflow(&self, spec: &RequestSpec, rec: &mut Record, failure: Option<Failure>) -> Option<Failure> {
        let (Some(ctx), Some(Failure::Error), Some(e)) = (self.context_length, failure, rec.error.as_mut()) else { return failure };
        let unexplained = matches!(e.kind.as_str(), "connection_dropped" | "stream_error") || e.kind.starts_with("http_5");
        let prompt = spec.prompt.total_tokens();
        if !unexplained || prompt + TEMPLATE_SLACK < ctx {
            return failure;
        }
        e.message =
            format!("the prompt ({prompt} tokens before the chat template) does not fit the server's context ({ctx}): {}", e.message);
        e.kind = "context_overflow".into();
        Some(Failure::ContextOverflow)
    }
}
