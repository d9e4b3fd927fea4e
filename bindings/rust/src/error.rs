use crate::sys;
use std::ffi::CStr;
use std::fmt;

/// The library's status codes (`LLM_ERR_*`), minus `LLM_OK`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    InvalidArgument,
    NullArgument,
    StructSize,
    Io,
    ModelFormat,
    Unsupported,
    OutOfMemory,
    Busy,
    NotFound,
    ContextOverflow,
    InvalidUtf8,
    BufferTooSmall,
    Backend,
    Shutdown,
    Internal,
    /// A KV stream made for another model or KV geometry (llm_kv_import).
    KvMismatch,
    /// A KV stream that is truncated or corrupted (llm_kv_import).
    KvCorrupt,
    /// A code this binding does not know (from a newer library).
    Other(i32),
}

impl Status {
    pub fn from_code(code: i32) -> Status {
        match code {
            sys::LLM_ERR_INVALID_ARGUMENT => Status::InvalidArgument,
            sys::LLM_ERR_NULL_ARGUMENT => Status::NullArgument,
            sys::LLM_ERR_STRUCT_SIZE => Status::StructSize,
            sys::LLM_ERR_IO => Status::Io,
            sys::LLM_ERR_MODEL_FORMAT => Status::ModelFormat,
            sys::LLM_ERR_UNSUPPORTED => Status::Unsupported,
            sys::LLM_ERR_OUT_OF_MEMORY => Status::OutOfMemory,
            sys::LLM_ERR_BUSY => Status::Busy,
            sys::LLM_ERR_NOT_FOUND => Status::NotFound,
            sys::LLM_ERR_CONTEXT_OVERFLOW => Status::ContextOverflow,
            sys::LLM_ERR_INVALID_UTF8 => Status::InvalidUtf8,
            sys::LLM_ERR_BUFFER_TOO_SMALL => Status::BufferTooSmall,
            sys::LLM_ERR_BACKEND => Status::Backend,
            sys::LLM_ERR_SHUTDOWN => Status::Shutdown,
            sys::LLM_ERR_INTERNAL => Status::Internal,
            sys::LLM_ERR_KV_MISMATCH => Status::KvMismatch,
            sys::LLM_ERR_KV_CORRUPT => Status::KvCorrupt,
            other => Status::Other(other),
        }
    }

    pub fn code(self) -> i32 {
        match self {
            Status::InvalidArgument => sys::LLM_ERR_INVALID_ARGUMENT,
            Status::NullArgument => sys::LLM_ERR_NULL_ARGUMENT,
            Status::StructSize => sys::LLM_ERR_STRUCT_SIZE,
            Status::Io => sys::LLM_ERR_IO,
            Status::ModelFormat => sys::LLM_ERR_MODEL_FORMAT,
            Status::Unsupported => sys::LLM_ERR_UNSUPPORTED,
            Status::OutOfMemory => sys::LLM_ERR_OUT_OF_MEMORY,
            Status::Busy => sys::LLM_ERR_BUSY,
            Status::NotFound => sys::LLM_ERR_NOT_FOUND,
            Status::ContextOverflow => sys::LLM_ERR_CONTEXT_OVERFLOW,
            Status::InvalidUtf8 => sys::LLM_ERR_INVALID_UTF8,
            Status::BufferTooSmall => sys::LLM_ERR_BUFFER_TOO_SMALL,
            Status::Backend => sys::LLM_ERR_BACKEND,
            Status::Shutdown => sys::LLM_ERR_SHUTDOWN,
            Status::Internal => sys::LLM_ERR_INTERNAL,
            Status::KvMismatch => sys::LLM_ERR_KV_MISMATCH,
            Status::KvCorrupt => sys::LLM_ERR_KV_CORRUPT,
            Status::Other(c) => c,
        }
    }

    /// The library's name for the code ("LLM_ERR_BUSY").
    pub fn name(self) -> &'static str {
        // SAFETY: llm_status_str returns a static, never-NULL string.
        unsafe { CStr::from_ptr(sys::llm_status_str(self.code())) }.to_str().unwrap_or("LLM_ERR_UNKNOWN")
    }
}

/// A failed call: the status code and the library's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    status: Status,
    message: String,
}

impl Error {
    pub fn new(status: Status, message: impl Into<String>) -> Error {
        Error { status, message: message.into() }
    }

    /// Builds the error for `code` from this thread's `llm_last_error()`.
    /// Call it right after the failing call, on the same thread.
    pub(crate) fn last(code: i32) -> Error {
        // SAFETY: llm_last_error never returns NULL.
        let msg = unsafe { CStr::from_ptr(sys::llm_last_error()) }.to_string_lossy().into_owned();
        Error::new(Status::from_code(code), msg)
    }

    pub(crate) fn check(code: i32) -> Result<(), Error> {
        if code == sys::LLM_OK { Ok(()) } else { Err(Error::last(code)) }
    }

    pub fn status(&self) -> Status {
        self.status
    }

    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            write!(f, "{}", self.status.name())
        } else {
            write!(f, "{}: {}", self.status.name(), self.message)
        }
    }
}

impl std::error::Error for Error {}
