//! Safe Rust bindings for llmrt.
//!
//! ```no_run
//! use llmrt::{Context, Event, Request};
//! let ctx = Context::builtin()?;                      // the model built into the library
//! for ev in ctx.submit(Request::new("Once upon a time").max_tokens(50).greedy())? {
//!     print!("{}", ev?.text());
//! }
//! # Ok::<(), llmrt::Error>(())
//! ```
//!
//! [`sys`] mirrors `llm.h` for calls the safe layer does not wrap.

mod context;
mod embed;
mod error;
mod event;
mod request;
pub mod sys;
mod tools;

pub use context::{Canceller, Completion, Context, ModelInfo, RequestHandle, Sequence};
pub use embed::{EmbedOptions, Pooling};
pub use error::{Error, Status};
pub use event::{Event, FinishReason, Metrics};
pub use request::{Backend, Constraint, ContentPart, ContextParams, Prompt, Request, SamplingParams};
pub use tools::{parse_tool_calls, ToolFormat};

/// The loaded library's version ("0.1.0").
pub fn version() -> String {
    // SAFETY: static, never-NULL string.
    unsafe { std::ffi::CStr::from_ptr(sys::llm_version()) }.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn context_is_send_and_sync() {
        assert_send_sync::<super::Context>();
        assert_send_sync::<super::Canceller>();
    }
}
