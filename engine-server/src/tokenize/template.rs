//! Chat templates per model family: messages → a sequence of marker tokens and text
//! pieces.
//!
//! Each message renders on its own (its pieces depend on the message alone), and
//! every text piece is bounded by markers in the usual conversation shapes, so
//! encoding piece by piece gives the same ids as encoding the whole templated string
//! — which is what lets [`super::ChatEncoder`] memoise per message.
//!
//! `deepseek-v4` (the default; V4, V4.1, V3.2 share it):
//!
//! ```text
//! <｜begin▁of▁sentence｜>{tools}{system}
//! <｜User｜>{user}
//! <｜Assistant｜></think>{content}<｜end▁of▁sentence｜>            (history, no reasoning sent)
//! <｜Assistant｜><think>{reasoning}</think>{content}<｜end▁of▁sentence｜>   (reasoning sent back)
//! <｜tool▁output▁begin｜>{tool result}<｜tool▁output▁end｜>
//! <｜Assistant｜><think>        generation prompt, thinking on
//! <｜Assistant｜></think>       generation prompt, thinking off
//! ```
//!
//! Assistant tool calls render as
//! `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>{name}<｜tool▁sep｜>{arguments}<｜tool▁call▁end｜>…<｜tool▁calls▁end｜>`
//! before the end-of-sentence marker. Reasoning sent back by the client is kept (the
//! client decides what history to send). `deepseek-v3` is the same without thinking
//! markers; `chatml` is `<|im_start|>{role}\n{content}<|im_end|>\n`.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

/// A message role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }

    /// Parses an OpenAI role name (`developer` is treated as `system`, as SGLang does).
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "system" | "developer" => Some(Role::System),
            "user" => Some(Role::User),
            "assistant" => Some(Role::Assistant),
            "tool" | "function" => Some(Role::Tool),
            _ => None,
        }
    }
}

/// One tool call made by the assistant in an earlier turn.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ToolCall {
    pub name: String,
    pub arguments: String,
}

/// One chat message, content already flattened to text.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ChatMessage {
    pub role: Role,
    pub content: String,
    pub reasoning_content: Option<String>,
    pub tool_calls: Vec<ToolCall>,
}

impl ChatMessage {
    pub fn new(role: Role, content: impl Into<String>) -> ChatMessage {
        ChatMessage { role, content: content.into(), reasoning_content: None, tool_calls: Vec::new() }
    }

    /// Bytes of text held (for cache accounting).
    pub fn text_len(&self) -> usize {
        self.content.len()
            + self.reasoning_content.as_ref().map_or(0, String::len)
            + self.tool_calls.iter().map(|t| t.name.len() + t.arguments.len()).sum::<usize>()
    }
}

/// Per-request options that change the rendering.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ChatOptions {
    /// Thinking mode: the generation prompt opens a `<think>` block.
    pub thinking: bool,
    /// Tool definitions (rendered as given, after BOS).
    pub tools: Option<String>,
}

/// A model family's chat template.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TemplateFamily {
    DeepSeekV4,
    DeepSeekV3,
    ChatMl,
}

impl fmt::Display for TemplateFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TemplateFamily::DeepSeekV4 => "deepseek-v4",
            TemplateFamily::DeepSeekV3 => "deepseek-v3",
            TemplateFamily::ChatMl => "chatml",
        })
    }
}

impl FromStr for TemplateFamily {
    type Err = super::TokenizeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "deepseek-v4" | "deepseek-v41" | "deepseek-v4.1" | "deepseek-v32" | "dsv4" => Ok(TemplateFamily::DeepSeekV4),
            "deepseek-v3" | "deepseek-v31" | "dsv3" => Ok(TemplateFamily::DeepSeekV3),
            "chatml" | "qwen" => Ok(TemplateFamily::ChatMl),
            _ => Err(super::TokenizeError::UnknownTemplate(s.to_string())),
        }
    }
}

impl TemplateFamily {
    /// The family for a model path or name (DeepSeek V4 when nothing matches).
    pub fn for_model(model: &str) -> TemplateFamily {
        let m = model.to_ascii_lowercase();
        if m.contains("deepseek-v3") && !m.contains("v3.2") {
            TemplateFamily::DeepSeekV3
        } else if m.contains("qwen") || m.contains("chatml") {
            TemplateFamily::ChatMl
        } else {
            TemplateFamily::DeepSeekV4
        }
    }

    /// Every marker this family emits (checked against the vocabulary at start-up).
    pub fn markers(self) -> &'static [&'static str] {
        match self {
            TemplateFamily::DeepSeekV4 => {
                &[BOS, USER, ASSISTANT, THINK, END_THINK, EOS, OUT_BEGIN, OUT_END, CALLS_BEGIN, CALLS_END, CALL_BEGIN, CALL_END, SEP]
            }
            TemplateFamily::DeepSeekV3 => {
                &[BOS, USER, ASSISTANT, EOS, OUT_BEGIN, OUT_END, CALLS_BEGIN, CALLS_END, CALL_BEGIN, CALL_END, SEP]
            }
            TemplateFamily::ChatMl => &[IM_START, IM_END],
        }
    }
}

const BOS: &str = "<｜begin▁of▁sentence｜>";
const EOS: &str = "<｜end▁of▁sentence｜>";
const USER: &str = "<｜User｜>";
const ASSISTANT: &str = "<｜Assistant｜>";
const THINK: &str = "<think>";
const END_THINK: &str = "</think>";
const OUT_BEGIN: &str = "<｜tool▁output▁begin｜>";
const OUT_END: &str = "<｜tool▁output▁end｜>";
const CALLS_BEGIN: &str = "<｜tool▁calls▁begin｜>";
const CALLS_END: &str = "<｜tool▁calls▁end｜>";
const CALL_BEGIN: &str = "<｜tool▁call▁begin｜>";
const CALL_END: &str = "<｜tool▁call▁end｜>";
const SEP: &str = "<｜tool▁sep｜>";
const IM_START: &str = "<|im_start|>";
const IM_END: &str = "<|im_end|>";

/// One rendered piece: a marker token, or text to encode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    Marker(&'static str),
    Text(Cow<'a, str>),
}

fn text(s: &str) -> Option<Piece<'_>> {
    (!s.is_empty()).then_some(Piece::Text(Cow::Borrowed(s)))
}

impl TemplateFamily {
    /// Pieces before the first message.
    pub fn prefix<'a>(self, opts: &'a ChatOptions) -> Vec<Piece<'a>> {
        let tools = opts.tools.as_deref().and_then(text);
        match self {
            TemplateFamily::DeepSeekV4 | TemplateFamily::DeepSeekV3 => std::iter::once(Piece::Marker(BOS)).chain(tools).collect(),
            TemplateFamily::ChatMl => match opts.tools.as_deref() {
                Some(t) if !t.is_empty() => vec![
                    Piece::Marker(IM_START),
                    Piece::Text(Cow::Owned(format!("system\n# Tools\n{t}"))),
                    Piece::Marker(IM_END),
                    Piece::Text(Cow::Borrowed("\n")),
                ],
                _ => Vec::new(),
            },
        }
    }

    /// Pieces of one message.
    pub fn message<'a>(self, m: &'a ChatMessage) -> Vec<Piece<'a>> {
        let mut out = Vec::with_capacity(8);
        match self {
            TemplateFamily::DeepSeekV4 | TemplateFamily::DeepSeekV3 => {
                let v4 = self == TemplateFamily::DeepSeekV4;
                match m.role {
                    Role::System => out.extend(text(&m.content)),
                    Role::User => {
                        out.push(Piece::Marker(USER));
                        out.extend(text(&m.content));
                    }
                    Role::Assistant => {
                        out.push(Piece::Marker(ASSISTANT));
                        if v4 {
                            if let Some(r) = m.reasoning_content.as_deref() {
                                out.push(Piece::Marker(THINK));
                                out.extend(text(r));
                            }
                            out.push(Piece::Marker(END_THINK));
                        }
                        out.extend(text(&m.content));
                        if !m.tool_calls.is_empty() {
                            out.push(Piece::Marker(CALLS_BEGIN));
                            for c in &m.tool_calls {
                                out.push(Piece::Marker(CALL_BEGIN));
                                out.extend(text(&c.name));
                                out.push(Piece::Marker(SEP));
                                out.extend(text(&c.arguments));
                                out.push(Piece::Marker(CALL_END));
                            }
                            out.push(Piece::Marker(CALLS_END));
                        }
                        out.push(Piece::Marker(EOS));
                    }
                    Role::Tool => {
                        out.push(Piece::Marker(OUT_BEGIN));
                        out.extend(text(&m.content));
                        out.push(Piece::Marker(OUT_END));
                    }
                }
            }
            TemplateFamily::ChatMl => {
                out.push(Piece::Marker(IM_START));
                let mut body = String::with_capacity(m.content.len() + 16);
                body.push_str(m.role.as_str());
                body.push('\n');
                if let Some(r) = m.reasoning_content.as_deref() {
                    body.push_str("<think>\n");
                    body.push_str(r);
                    body.push_str("\n</think>\n\n");
                }
                body.push_str(&m.content);
                for c in &m.tool_calls {
                    body.push_str("\n<tool_call>\n{\"name\": \"");
                    body.push_str(&c.name);
                    body.push_str("\", \"arguments\": ");
                    body.push_str(&c.arguments);
                    body.push_str("}\n</tool_call>");
                }
                out.push(Piece::Text(Cow::Owned(body)));
                out.push(Piece::Marker(IM_END));
                out.push(Piece::Text(Cow::Borrowed("\n")));
            }
        }
        out
    }

    /// Pieces of the generation prompt after the last message.
    pub fn generation_prompt(self, opts: &ChatOptions) -> Vec<Piece<'static>> {
        match self {
            TemplateFamily::DeepSeekV4 => vec![Piece::Marker(ASSISTANT), Piece::Marker(if opts.thinking { THINK } else { END_THINK })],
            TemplateFamily::DeepSeekV3 => vec![Piece::Marker(ASSISTANT)],
            TemplateFamily::ChatMl => vec![
                Piece::Marker(IM_START),
                Piece::Text(Cow::Borrowed(if opts.thinking { "assistant\n<think>\n" } else { "assistant\n" })),
            ],
        }
    }

    /// The whole templated prompt as one string (what SGLang would tokenize).
    pub fn render(self, messages: &[ChatMessage], opts: &ChatOptions) -> String {
        let mut s = String::new();
        let mut push = |p: Piece<'_>| match p {
            Piece::Marker(m) => s.push_str(m),
            Piece::Text(t) => s.push_str(&t),
        };
        self.prefix(opts).into_iter().for_each(&mut push);
        for m in messages {
            self.message(m).into_iter().for_each(&mut push);
        }
        self.generation_prompt(opts).into_iter().for_each(&mut push);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deepseek_v4_matches_the_reference_shape() {
        let msgs = vec![
            ChatMessage::new(Role::System, "You are a helpful assistant."),
            ChatMessage::new(Role::User, "hello"),
            ChatMessage::new(Role::Assistant, "Hello! I am DeepSeek."),
            ChatMessage::new(Role::User, "1+1=?"),
        ];
        let opts = ChatOptions { thinking: true, tools: None };
        assert_eq!(
            TemplateFamily::DeepSeekV4.render(&msgs, &opts),
            "<｜begin▁of▁sentence｜>You are a helpful assistant.<｜User｜>hello<｜Assistant｜></think>Hello! I am DeepSeek.<｜end▁of▁sentence｜><｜User｜>1+1=?<｜Assistant｜><think>"
        );
    }

    #[test]
    fn tool_turns_render_with_markers() {
        let mut call = ChatMessage::new(Role::Assistant, "");
        call.tool_calls.push(ToolCall { name: "read".into(), arguments: "{\"path\":\"a.rs\"}".into() });
        call.reasoning_content = Some("need the file".into());
        let msgs = vec![ChatMessage::new(Role::User, "fix it"), call, ChatMessage::new(Role::Tool, "fn main() {}")];
        let s = TemplateFamily::DeepSeekV4.render(&msgs, &ChatOptions::default());
        assert_eq!(
            s,
            "<｜begin▁of▁sentence｜><｜User｜>fix it<｜Assistant｜><think>need the file</think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>read<｜tool▁sep｜>{\"path\":\"a.rs\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜><｜tool▁output▁begin｜>fn main() {}<｜tool▁output▁end｜><｜Assistant｜></think>"
        );
    }

    #[test]
    fn chatml_and_family_selection() {
        let msgs = vec![ChatMessage::new(Role::User, "hi")];
        assert_eq!(
            TemplateFamily::ChatMl.render(&msgs, &ChatOptions::default()),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
        );
        assert_eq!(TemplateFamily::for_model("deepseek-ai/DeepSeek-V4.1-Flash"), TemplateFamily::DeepSeekV4);
        assert_eq!(TemplateFamily::for_model("deepseek-ai/DeepSeek-V3-0324"), TemplateFamily::DeepSeekV3);
        assert_eq!(TemplateFamily::for_model("Qwen/Qwen3-8B"), TemplateFamily::ChatMl);
        assert!("llama".parse::<TemplateFamily>().is_err());
        assert_eq!(Role::parse("developer"), Some(Role::System));
    }
}
