//! Tool calls in a model's reply (`llm_chat_parse_tool_calls`).

use crate::error::Error;
use crate::sys;

/// The formats models write tool calls in (`LLM_TOOL_FORMAT_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolFormat {
    /// Parsing: whichever marker the text has.
    Auto,
    /// The whole reply is JSON: `{"tool_calls": [...]}`, a call, or a list of calls.
    Generic,
    /// Qwen2.5, Qwen3, Hermes: `<tool_call>{...}</tool_call>`.
    Hermes,
    /// Llama 3.x JSON tool calling (`<|python_tag|>`, `"parameters"`).
    Llama3,
    /// Mistral: `[TOOL_CALLS][...]` or `[TOOL_CALLS]name[ARGS]{...}`.
    Mistral,
}

impl ToolFormat {
    pub fn raw(self) -> i32 {
        match self {
            ToolFormat::Auto => sys::LLM_TOOL_FORMAT_AUTO,
            ToolFormat::Generic => sys::LLM_TOOL_FORMAT_GENERIC,
            ToolFormat::Hermes => sys::LLM_TOOL_FORMAT_HERMES,
            ToolFormat::Llama3 => sys::LLM_TOOL_FORMAT_LLAMA3,
            ToolFormat::Mistral => sys::LLM_TOOL_FORMAT_MISTRAL,
        }
    }

    pub fn from_raw(v: i32) -> Option<ToolFormat> {
        [ToolFormat::Auto, ToolFormat::Generic, ToolFormat::Hermes, ToolFormat::Llama3, ToolFormat::Mistral]
            .into_iter()
            .find(|f| f.raw() == v)
    }
}

/// Splits `text` into its tool calls and the rest, as compact JSON:
/// `{"content": "...", "tool_calls": [{"name": "...", "arguments": {...}}]}`
/// (parse it with the JSON library of your choice). Text without a call is
/// all content; a call's marker followed by a malformed call (truncated JSON,
/// no name) is an `InvalidArgument` error naming the byte offset.
pub fn parse_tool_calls(format: ToolFormat, text: &str) -> Result<String, Error> {
    let mut out = vec![0u8; text.len() + 64];
    loop {
        let mut n = 0usize;
        // SAFETY: text and out are valid for the lengths passed.
        let st = unsafe {
            sys::llm_chat_parse_tool_calls(format.raw(), text.as_ptr().cast(), text.len(), out.as_mut_ptr().cast(),
                                           out.len(), &mut n)
        };
        if st == sys::LLM_ERR_BUFFER_TOO_SMALL {
            out.resize(n, 0);
            continue;
        }
        Error::check(st)?;
        out.truncate(n);
        return Ok(String::from_utf8_lossy(&out).into_owned());
    }
}
