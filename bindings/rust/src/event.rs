use crate::sys;
use crate::{Error, Status};
use std::ffi::CStr;

/// Why a sequence ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// End-of-generation token or a stop string.
    Stop,
    /// `max_tokens` reached, or the context is full.
    Length,
    /// Cancelled by the caller or by dropping the context.
    Cancelled,
}

/// Per-sequence figures carried by the final event.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Metrics {
    pub prompt_tokens: i32,
    pub cached_prompt_tokens: i32,
    pub generated_tokens: i32,
    pub queue_ms: f64,
    pub ttft_ms: f64,
    pub tpot_ms: f64,
    pub total_ms: f64,
}

/// One event of a request, copied out of the library's buffers.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A generated token and the text it completes (whole UTF-8; may be
    /// empty while a split character or a possible stop string is held back).
    ///
    /// `top_logprobs`: the request's `top_logprobs` most likely (token id,
    /// logprob) at this position, most likely first (empty when not asked).
    Token { seq: i32, token: i32, text: String, logprob: f32, top_logprobs: Vec<(i32, f32)> },
    /// The last event of a sequence; `text` is any held-back remainder.
    Final { seq: i32, text: String, finish: FinishReason, metrics: Metrics },
}

impl Event {
    /// The text this event adds to the output.
    pub fn text(&self) -> &str {
        match self {
            Event::Token { text, .. } | Event::Final { text, .. } => text,
        }
    }

    pub fn seq(&self) -> i32 {
        match self {
            Event::Token { seq, .. } | Event::Final { seq, .. } => *seq,
        }
    }

    pub fn is_final(&self) -> bool {
        matches!(self, Event::Final { .. })
    }
}

unsafe fn bytes_to_string(p: *const std::os::raw::c_char, len: usize) -> String {
    if p.is_null() || len == 0 {
        return String::new();
    }
    String::from_utf8_lossy(std::slice::from_raw_parts(p as *const u8, len)).into_owned()
}

/// Copies a library event. A final event that ended in an error becomes
/// `Err`, carrying that status and message.
///
/// # Safety
/// `ev` must be an event written by `llm_poll` whose pointers are still valid.
pub(crate) unsafe fn convert(ev: &sys::llm_event) -> Result<Event, Error> {
    let text = bytes_to_string(ev.text, ev.text_len as usize);
    if ev.type_ == sys::LLM_EVENT_TOKEN {
        let top_logprobs = if ev.top_logprobs.is_null() || ev.n_top_logprobs <= 0 {
            Vec::new()
        } else {
            std::slice::from_raw_parts(ev.top_logprobs, ev.n_top_logprobs as usize)
                .iter()
                .map(|t| (t.token, t.logprob))
                .collect()
        };
        return Ok(Event::Token { seq: ev.seq_index, token: ev.token, text, logprob: ev.logprob, top_logprobs });
    }
    let finish = match ev.finish_reason {
        sys::LLM_FINISH_STOP => FinishReason::Stop,
        sys::LLM_FINISH_LENGTH => FinishReason::Length,
        sys::LLM_FINISH_CANCELLED => FinishReason::Cancelled,
        _ => {
            let msg = if ev.message.is_null() {
                String::new()
            } else {
                CStr::from_ptr(ev.message).to_string_lossy().into_owned()
            };
            let code = if ev.status == sys::LLM_OK { sys::LLM_ERR_INTERNAL } else { ev.status };
            return Err(Error::new(Status::from_code(code), msg));
        }
    };
    let m = &ev.metrics;
    let metrics = Metrics {
        prompt_tokens: m.prompt_tokens,
        cached_prompt_tokens: m.cached_prompt_tokens,
        generated_tokens: m.generated_tokens,
        queue_ms: m.queue_ms,
        ttft_ms: m.ttft_ms,
        tpot_ms: m.tpot_ms,
        total_ms: m.total_ms,
    };
    Ok(Event::Final { seq: ev.seq_index, text, finish, metrics })
}
