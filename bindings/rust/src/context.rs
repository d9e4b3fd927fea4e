//! The safe context: one pump thread per context polls the library and
//! routes each event to the channel of its request, so any number of threads
//! can submit and consume at once without stealing each other's events.
//!
//! ```text
//!  submit ──► llm_submit ──► engine thread
//!                               │ events
//!  pump thread: llm_poll ◄──────┘
//!      └─► routes[request_id] ──► mpsc channel ──► RequestHandle (Iterator)
//! ```

use crate::event::{convert, Event, FinishReason, Metrics};
use crate::request::{ContextParams, RawRequest, Request};
use crate::sys;
use crate::{Error, Status};
use std::collections::HashMap;
use std::path::Path;
use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;

type Item = Result<Event, Error>;

struct Route {
    tx: Sender<Item>,
    finals_left: i32,
}

/// What the context's threads share. The library handle is destroyed when
/// the last strong reference goes: the `Context` and, while it runs, the pump.
struct Shared {
    raw: *mut sys::llm_ctx,
    routes: Mutex<HashMap<u64, Route>>,
    stopping: AtomicBool,
}

// SAFETY: llm.h makes submit, cancel, poll, wakeup, stats and the tokenizer
// thread-safe on one context; destroy runs only in Drop, when no other
// reference (hence no other call) is left.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Drop for Shared {
    fn drop(&mut self) {
        unsafe { sys::llm_ctx_destroy(self.raw) };
    }
}

/// A loaded model with its engine thread. `Send + Sync`: share it with
/// `Arc<Context>` or scoped threads; every method takes `&self`.
pub struct Context {
    shared: Arc<Shared>,
    pump: Option<JoinHandle<()>>,
}

/// Model facts from `llm_model_get_info`.
#[derive(Debug, Clone)]
pub struct ModelInfo {
    pub n_vocab: i32,
    pub n_ctx_train: i32,
    pub n_ctx: i32,
    pub n_embd: i32,
    pub n_layer: i32,
    pub n_head: i32,
    pub n_head_kv: i32,
    pub bos: Option<i32>,
    pub eos: Option<i32>,
    pub n_params: i64,
    pub arch: String,
    pub name: String,
}

const POLL_CAPACITY: usize = 64;

fn pump(shared: Arc<Shared>) {
    // SAFETY: llm_event is plain data; zeroed pointers are NULL.
    let mut buf: Vec<sys::llm_event> = vec![unsafe { std::mem::zeroed() }; POLL_CAPACITY];
    while !shared.stopping.load(Ordering::Acquire) {
        buf[0].struct_size = std::mem::size_of::<sys::llm_event>() as u32;
        let mut n: u32 = 0;
        let st = unsafe { sys::llm_poll(shared.raw, buf.as_mut_ptr(), POLL_CAPACITY as u32, &mut n, -1) };
        if st != sys::LLM_OK {
            // Not expected with valid arguments: fail every waiting request.
            let err = Error::last(st);
            for (_, r) in shared.routes.lock().unwrap().drain() {
                let _ = r.tx.send(Err(err.clone()));
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
            continue;
        }
        let mut routes = shared.routes.lock().unwrap();
        for ev in &buf[..n as usize] {
            let Some(route) = routes.get_mut(&ev.request_id) else { continue };
            // SAFETY: the event was just written by llm_poll; its pointers
            // are valid until our next poll.
            let item = unsafe { convert(ev) };
            let last = ev.type_ == sys::LLM_EVENT_FINAL && {
                route.finals_left -= 1;
                route.finals_left == 0
            };
            let gone = route.tx.send(item).is_err();
            if last || gone {
                routes.remove(&ev.request_id);
            }
        }
    }
}

impl Context {
    /// Loads the model and starts the engine. A missing model file gives
    /// `Err` with status [`Status::Io`] and the library's message.
    pub fn new(params: ContextParams) -> Result<Context, Error> {
        let mut p = unsafe { sys::init_struct(sys::llm_ctx_params_init) };
        let path = match &params.model_path {
            Some(path) => Some(
                CString::new(path.to_string_lossy().as_bytes())
                    .map_err(|_| Error::new(Status::InvalidArgument, "model path contains a NUL byte"))?,
            ),
            None => None,
        };
        p.model_path = path.as_ref().map_or(std::ptr::null(), |s| s.as_ptr());
        let mmproj = match &params.mmproj_path {
            Some(path) => Some(
                CString::new(path.to_string_lossy().as_bytes())
                    .map_err(|_| Error::new(Status::InvalidArgument, "mmproj path contains a NUL byte"))?,
            ),
            None => None,
        };
        p.mmproj_path = mmproj.as_ref().map_or(std::ptr::null(), |s| s.as_ptr());
        p.backend = params.backend.code();
        p.n_threads = params.n_threads;
        p.n_ctx = params.n_ctx;
        p.kv_block_size = params.kv_block_size;
        p.n_kv_blocks = params.n_kv_blocks;
        p.max_seqs = params.max_seqs;
        p.max_batch_tokens = params.max_batch_tokens;
        p.max_queued = params.max_queued;
        p.kv_type = params.kv_type;
        p.kv_type_v = params.kv_type_v;
        let mut raw: *mut sys::llm_ctx = std::ptr::null_mut();
        Error::check(unsafe { sys::llm_ctx_create(&p, &mut raw) })?;
        let shared = Arc::new(Shared { raw, routes: Mutex::new(HashMap::new()), stopping: AtomicBool::new(false) });
        let for_pump = Arc::clone(&shared);
        let pump = std::thread::Builder::new()
            .name("llmrt-pump".into())
            .spawn(move || pump(for_pump))
            .map_err(|e| Error::new(Status::Internal, format!("cannot start the poll thread: {e}")))?;
        Ok(Context { shared, pump: Some(pump) })
    }

    /// The built-in model with default settings.
    pub fn builtin() -> Result<Context, Error> {
        Context::new(ContextParams::default())
    }

    /// Queues a request and returns at once. The handle streams its events
    /// (as an `Iterator`, or through [`RequestHandle::for_each_event`]).
    pub fn submit(&self, request: Request) -> Result<RequestHandle, Error> {
        let raw = RawRequest::new(&request)?;
        let (tx, rx) = channel();
        let finals = request.n.max(1);
        let mut id: u64 = 0;
        // The route must exist before the pump can see the first event, so
        // the lock is held across the (non-blocking) submit.
        let mut routes = self.shared.routes.lock().unwrap();
        Error::check(unsafe { sys::llm_submit(self.shared.raw, &raw.req, &mut id) })?;
        routes.insert(id, Route { tx, finals_left: finals });
        drop(routes);
        Ok(RequestHandle { id, rx, shared: Arc::downgrade(&self.shared), finals_left: finals, done: false })
    }

    /// Submits and collects the whole output (every sequence).
    pub fn generate(&self, request: Request) -> Result<Completion, Error> {
        self.submit(request)?.for_each_event(|_| true)
    }

    /// Stops request `id` at the next step. Finished or unknown ids are not
    /// an error here.
    pub fn cancel(&self, id: u64) -> Result<(), Error> {
        cancel_raw(self.shared.raw, id)
    }

    pub fn model_info(&self) -> Result<ModelInfo, Error> {
        let mut m: sys::llm_model_info = unsafe { std::mem::zeroed() };
        m.struct_size = std::mem::size_of::<sys::llm_model_info>() as u32;
        Error::check(unsafe { sys::llm_model_get_info(self.shared.raw, &mut m) })?;
        let s = |p: *const std::os::raw::c_char| {
            if p.is_null() { String::new() } else { unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned() }
        };
        Ok(ModelInfo {
            n_vocab: m.n_vocab,
            n_ctx_train: m.n_ctx_train,
            n_ctx: m.n_ctx,
            n_embd: m.n_embd,
            n_layer: m.n_layer,
            n_head: m.n_head,
            n_head_kv: m.n_head_kv,
            bos: (m.bos >= 0).then_some(m.bos),
            eos: (m.eos >= 0).then_some(m.eos),
            n_params: m.n_params,
            arch: s(m.arch),
            name: s(m.name),
        })
    }

    /// Saves the KV of the cached prefix of `tokens` (a finished request's
    /// prompt + output) to the file `path` (`llm_kv_export_file`: written
    /// beside it and renamed); returns the tokens saved, whole KV blocks.
    pub fn export_kv_file(&self, tokens: &[i32], cache_salt: u64, path: impl AsRef<Path>) -> Result<i32, Error> {
        let p = path_cstring(path.as_ref())?;
        let mut n = 0i32;
        Error::check(unsafe {
            sys::llm_kv_export_file(self.shared.raw, tokens.as_ptr(), tokens.len() as i32, cache_salt, p.as_ptr(), &mut n)
        })?;
        Ok(n)
    }

    /// Loads a file written by `export_kv_file` into the prefix cache
    /// (`llm_kv_import_file`); returns how many tokens a request starting
    /// with them now reuses. Another model's or geometry's file is
    /// `Status::KvMismatch`, a damaged one `Status::KvCorrupt`.
    pub fn import_kv_file(&self, cache_salt: u64, path: impl AsRef<Path>) -> Result<i32, Error> {
        let p = path_cstring(path.as_ref())?;
        let mut n = 0i32;
        Error::check(unsafe { sys::llm_kv_import_file(self.shared.raw, cache_salt, p.as_ptr(), &mut n) })?;
        Ok(n)
    }

    /// Token ids of `text` (`add_special`: BOS as the model says).
    pub fn tokenize(&self, text: &str, add_special: bool) -> Result<Vec<i32>, Error> {
        let flags = if add_special { sys::LLM_TOKENIZE_ADD_SPECIAL } else { 0 };
        let mut out = vec![0i32; text.len() + 8];
        loop {
            let mut n = 0i32;
            let st = unsafe {
                sys::llm_tokenize(self.shared.raw, text.as_ptr().cast(), text.len(), flags, out.as_mut_ptr(), out.len() as i32, &mut n)
            };
            if st == sys::LLM_ERR_BUFFER_TOO_SMALL {
                out.resize(n as usize, 0);
                continue;
            }
            Error::check(st)?;
            out.truncate(n as usize);
            return Ok(out);
        }
    }

    /// The text of `tokens` (the leading dummy-prefix space kept).
    pub fn detokenize(&self, tokens: &[i32]) -> Result<String, Error> {
        let mut out = vec![0u8; tokens.len() * 8 + 16];
        loop {
            let mut n = 0usize;
            let st = unsafe {
                sys::llm_detokenize(self.shared.raw, tokens.as_ptr(), tokens.len() as i32, 0, out.as_mut_ptr().cast(), out.len(), &mut n)
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

    /// The format the model's chat template writes tool calls in.
    pub fn tool_format(&self) -> Result<crate::ToolFormat, Error> {
        let mut f = 0i32;
        // SAFETY: a live context; NULL template = the model's own.
        Error::check(unsafe { sys::llm_chat_tool_format(self.shared.raw, std::ptr::null(), &mut f) })?;
        Ok(crate::ToolFormat::from_raw(f).unwrap_or(crate::ToolFormat::Generic))
    }

    /// The underlying handle, for calls this wrapper does not cover. It stays
    /// valid while `self` lives; do not destroy it and do not call `llm_poll`
    /// on it (the pump thread owns polling).
    pub fn as_raw(&self) -> *mut sys::llm_ctx {
        self.shared.raw
    }
}

impl Drop for Context {
    /// Stops the pump, cancels what is in flight (handles still alive then
    /// end with a `Shutdown` error), and frees the context once no handle
    /// is in the middle of a call.
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::Release);
        unsafe { sys::llm_wakeup(self.shared.raw) };
        if let Some(p) = self.pump.take() {
            let _ = p.join();
        }
        let routes: Vec<u64> = self.shared.routes.lock().unwrap().drain().map(|(id, _)| id).collect();
        for id in routes {
            unsafe { sys::llm_cancel(self.shared.raw, id) };
        }
    }
}

fn cancel_raw(raw: *mut sys::llm_ctx, id: u64) -> Result<(), Error> {
    match unsafe { sys::llm_cancel(raw, id) } {
        sys::LLM_OK | sys::LLM_ERR_NOT_FOUND => Ok(()),
        st => Err(Error::last(st)),
    }
}

/// Cancels one request from any thread; cheap to clone.
#[derive(Clone)]
pub struct Canceller {
    id: u64,
    shared: Weak<Shared>,
}

impl Canceller {
    pub fn cancel(&self) -> Result<(), Error> {
        match self.shared.upgrade() {
            Some(s) => cancel_raw(s.raw, self.id),
            None => Ok(()), // the context is gone, and the request with it
        }
    }
}

/// The output of one sequence.
#[derive(Debug, Clone, PartialEq)]
pub struct Sequence {
    pub text: String,
    pub tokens: Vec<i32>,
    pub finish: FinishReason,
    pub metrics: Metrics,
}

/// Everything a request produced, one entry per sequence (`n`).
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub sequences: Vec<Sequence>,
}

impl Completion {
    /// The text of the first sequence.
    pub fn text(&self) -> &str {
        &self.sequences[0].text
    }
    pub fn tokens(&self) -> &[i32] {
        &self.sequences[0].tokens
    }
    pub fn finish(&self) -> FinishReason {
        self.sequences[0].finish
    }
}

/// A submitted request. Iterate it for its events (it ends after the last
/// sequence's final event; a sequence that failed yields `Err`), or call
/// [`for_each_event`](Self::for_each_event). Dropping it before the end
/// cancels the request.
pub struct RequestHandle {
    id: u64,
    rx: Receiver<Item>,
    shared: Weak<Shared>,
    finals_left: i32,
    done: bool,
}

impl RequestHandle {
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Asks the engine to stop; the stream then ends with
    /// [`FinishReason::Cancelled`] (unless it finished first).
    pub fn cancel(&self) -> Result<(), Error> {
        self.canceller().cancel()
    }

    /// A handle to cancel this request from another thread while this one
    /// iterates.
    pub fn canceller(&self) -> Canceller {
        Canceller { id: self.id, shared: self.shared.clone() }
    }

    /// Streams through a closure; return `false` from it to cancel (the
    /// events up to the final one still arrive). Returns the collected output.
    pub fn for_each_event(mut self, mut f: impl FnMut(&Event) -> bool) -> Result<Completion, Error> {
        let mut seqs: Vec<Option<Sequence>> = Vec::new();
        let mut cancelled = false;
        while let Some(item) = self.next() {
            let ev = item?;
            let i = ev.seq().max(0) as usize;
            if seqs.len() <= i {
                seqs.resize(i + 1, None);
            }
            let s = seqs[i].get_or_insert_with(|| Sequence {
                text: String::new(),
                tokens: Vec::new(),
                finish: FinishReason::Length,
                metrics: Metrics::default(),
            });
            s.text.push_str(ev.text());
            match &ev {
                Event::Token { token, .. } => s.tokens.push(*token),
                Event::Final { finish, metrics, .. } => {
                    s.finish = *finish;
                    s.metrics = *metrics;
                }
            }
            if !f(&ev) && !cancelled {
                cancelled = true;
                self.cancel()?;
            }
        }
        Ok(Completion { sequences: seqs.into_iter().flatten().collect() })
    }
}

impl Iterator for RequestHandle {
    type Item = Result<Event, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.rx.recv() {
            Ok(item) => {
                if !matches!(item, Ok(Event::Token { .. })) {
                    self.finals_left -= 1;
                    self.done = self.finals_left <= 0;
                }
                Some(item)
            }
            Err(_) => {
                self.done = true;
                Some(Err(Error::new(Status::Shutdown, "the context was dropped")))
            }
        }
    }
}

impl Drop for RequestHandle {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Some(s) = self.shared.upgrade() {
            s.routes.lock().unwrap().remove(&self.id);
            let _ = cancel_raw(s.raw, self.id);
        }
    }
}

fn path_cstring(path: &Path) -> Result<CString, Error> {
    let s = path.to_str().ok_or_else(|| Error::new(Status::InvalidArgument, "the path is not valid UTF-8"))?;
    CString::new(s).map_err(|_| Error::new(Status::InvalidArgument, "the path contains a NUL byte"))
}
