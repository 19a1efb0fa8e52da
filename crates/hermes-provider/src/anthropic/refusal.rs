//! Why a chat completions request cannot be sent to Anthropic: [`Refusal`], one variant per
//! kind of refusal, its text the reason the client reads in its 400 (after `the request
//! cannot be sent to <endpoint>: `).
//!
//! Positions are the index of the message (`messages[i]`) or tool (`tools[i]`) in the
//! client's request; values are quoted as the client sent them (compact JSON).

use serde_json::Value;

/// A request [`super::to_messages_request`] refuses to translate, and why.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The body is not a JSON object.
    #[error("the request body must be a JSON object")]
    NotAnObject,

    /// `model` is missing or not a string.
    #[error("`model` must be a string")]
    Model,

    /// `messages` is missing or not an array.
    #[error("`messages` must be an array")]
    Messages,

    /// `n` asks for more (or other) than one choice.
    #[error("`n` is {n}, but Anthropic answers with one choice only; send `n: 1` or leave it out")]
    Choices {
        /// The `n` sent.
        n: Value,
    },

    /// `max_completion_tokens` or `max_tokens` is not a positive number.
    #[error("`{name}` is {value}, but Anthropic needs a positive number of tokens")]
    MaxTokens {
        /// Which of the two fields.
        name: &'static str,
        /// Its value.
        value: Value,
    },

    /// A sampling parameter (`temperature`, `top_p`, `top_k`) is not a number.
    #[error("`{name}` must be a number, not {value}")]
    Sampling {
        /// The parameter.
        name: &'static str,
        /// Its value.
        value: Value,
    },

    /// `stop` is neither a string nor a list of strings.
    #[error("`stop` must be a string or a list of strings, not {value}")]
    Stop {
        /// Its value.
        value: Value,
    },

    /// `tools` is not a list.
    #[error("`tools` must be a list, not {value}")]
    Tools {
        /// Its value.
        value: Value,
    },

    /// `tool_choice` is a word other than `auto`, `none` and `required`.
    #[error(
        "`tool_choice` is `{word}`; use auto, none, required or \
         {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}"
    )]
    ToolChoiceWord {
        /// The word sent.
        word: String,
    },

    /// `tool_choice` is an object that names no function.
    #[error(
        "`tool_choice` {value} names no function; use {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}"
    )]
    ToolChoiceUnnamed {
        /// The object sent.
        value: Value,
    },

    /// A tool is not a `function` tool.
    #[error("tool {tool} is of type `{kind}`; only `function` tools can be sent to Anthropic")]
    ToolType {
        /// The tool's position in `tools`.
        tool: usize,
        /// Its `type`.
        kind: String,
    },

    /// A tool has no `function.name`.
    #[error("tool {tool} has no `function.name`")]
    ToolName {
        /// The tool's position in `tools`.
        tool: usize,
    },

    /// A message has no string `role`.
    #[error("message {message} has no string `role`")]
    NoRole {
        /// The message's position.
        message: usize,
    },

    /// A message's role has no Anthropic counterpart (`function`).
    #[error(
        "message {message} has role `{role}`, which Anthropic cannot express; \
         use system, user, assistant or tool"
    )]
    Role {
        /// The message's position.
        message: usize,
        /// Its role.
        role: String,
    },

    /// A system message has a part that is not text.
    #[error("message {message} (system) has a `{kind}` part; a system prompt holds text only")]
    SystemPart {
        /// The message's position.
        message: usize,
        /// The part's block type.
        kind: String,
    },

    /// A message's `content` is neither text, a list of parts nor null.
    #[error("message {message} has content {content}")]
    Content {
        /// The message's position.
        message: usize,
        /// Its content.
        content: Value,
    },

    /// A content part's type has no Anthropic counterpart (`input_audio`, `file`).
    #[error(
        "message {message} has a content part of type `{kind}`, which Anthropic \
         cannot take; send text and images"
    )]
    PartType {
        /// The message's position.
        message: usize,
        /// The part's type.
        kind: String,
    },

    /// A content part is neither a string nor an object.
    #[error("message {message} has a content part {part}")]
    Part {
        /// The message's position.
        message: usize,
        /// The part.
        part: Value,
    },

    /// An image `data:` URL has no `,` before its data.
    #[error("message {message} has an image `data:` URL without data")]
    ImageWithoutData {
        /// The message's position.
        message: usize,
    },

    /// An image `data:` URL is not base64.
    #[error(
        "message {message} has an image `data:` URL that is not base64; Anthropic takes \
         base64 images only"
    )]
    ImageNotBase64 {
        /// The message's position.
        message: usize,
    },

    /// An image URL is neither http(s) nor a `data:` URL.
    #[error("message {message} has an image URL that is neither http(s) nor a base64 `data:` URL")]
    ImageUrl {
        /// The message's position.
        message: usize,
    },

    /// An assistant message's `tool_calls` is not a list.
    #[error("message {message} has `tool_calls` {value}, not a list")]
    ToolCalls {
        /// The message's position.
        message: usize,
        /// Its `tool_calls`.
        value: Value,
    },

    /// A tool call has no `function.name`.
    #[error("message {message} has a tool call without `function.name`")]
    ToolCallName {
        /// The message's position.
        message: usize,
    },

    /// A tool call's `arguments` are not JSON.
    // The parse error is part of the reason, as the client reads it: kept out of the
    // source chain so that it is said once.
    #[error(
        "message {message} has a tool call `{name}` whose arguments are not valid JSON: {error}"
    )]
    ArgumentsNotJson {
        /// The message's position.
        message: usize,
        /// The function called.
        name: String,
        /// Where the JSON parse failed.
        error: serde_json::Error,
    },

    /// A tool call's `arguments` are JSON, but not an object.
    #[error("message {message} has a tool call `{name}` whose arguments are not a JSON object")]
    ArgumentsNotObject {
        /// The message's position.
        message: usize,
        /// The function called.
        name: String,
    },

    /// A `tool` message has no `tool_call_id`.
    #[error("message {message} (tool) has no `tool_call_id`")]
    NoToolCallId {
        /// The message's position.
        message: usize,
    },

    /// A `tool` message has a part a `tool_result` cannot hold.
    #[error("message {message} (tool) has a `{kind}` part; a tool result holds text and images")]
    ToolResultPart {
        /// The message's position.
        message: usize,
        /// The part's block type.
        kind: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The texts are the reasons clients read: a few of them spelled out in full.
    #[test]
    fn the_reasons_read_as_before() {
        let cases = [
            (
                Refusal::Choices { n: json!(3) },
                "`n` is 3, but Anthropic answers with one choice only; send `n: 1` or leave it out",
            ),
            (
                Refusal::ToolChoiceWord { word: "f".into() },
                "`tool_choice` is `f`; use auto, none, required or {\"type\": \"function\", \"function\": {\"name\": ...}}",
            ),
            (
                Refusal::ToolChoiceUnnamed {
                    value: json!({"type": "function"}),
                },
                "`tool_choice` {\"type\":\"function\"} names no function; use {\"type\": \"function\", \"function\": {\"name\": ...}}",
            ),
            (
                Refusal::Role {
                    message: 0,
                    role: "function".into(),
                },
                "message 0 has role `function`, which Anthropic cannot express; use system, user, assistant or tool",
            ),
            (
                Refusal::PartType {
                    message: 2,
                    kind: "input_audio".into(),
                },
                "message 2 has a content part of type `input_audio`, which Anthropic cannot take; send text and images",
            ),
            (
                Refusal::ImageNotBase64 { message: 1 },
                "message 1 has an image `data:` URL that is not base64; Anthropic takes base64 images only",
            ),
            (
                Refusal::Content {
                    message: 4,
                    content: json!(5),
                },
                "message 4 has content 5",
            ),
        ];
        for (refusal, text) in cases {
            assert_eq!(refusal.to_string(), text);
        }
    }
}
