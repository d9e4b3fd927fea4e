use crate::sys;
use crate::{Error, Status};
use std::ffi::CString;
use std::path::PathBuf;

/// Which compute backend a context uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// CUDA when built with it and a GPU is present, else CPU.
    #[default]
    Auto,
    Cpu,
    Cuda,
}

impl Backend {
    pub(crate) fn code(self) -> i32 {
        match self {
            Backend::Auto => sys::LLM_BACKEND_AUTO,
            Backend::Cpu => sys::LLM_BACKEND_CPU,
            Backend::Cuda => sys::LLM_BACKEND_CUDA,
        }
    }
}

/// Parameters of [`Context::new`](crate::Context::new). Zero means "the
/// library's default" for every numeric field, as in `llm_ctx_params`.
#[derive(Debug, Clone, Default)]
pub struct ContextParams {
    /// GGUF file; `None` is the model built into the library.
    pub model_path: Option<PathBuf>,
    pub backend: Backend,
    pub n_threads: i32,
    pub n_ctx: i32,
    pub kv_block_size: i32,
    pub n_kv_blocks: i32,
    pub max_seqs: i32,
    pub max_batch_tokens: i32,
    pub max_queued: i32,
    /// KV cache element type of K (and V): `sys::LLM_KV_*`; 0 is the
    /// backend's own (`llm_ctx_params.kv_type`).
    pub kv_type: i32,
    /// V's element type when it differs from K's (`llm_ctx_params.kv_type_v`):
    /// `sys::LLM_KV_*`; 0 is "as `kv_type`". CPU and CUDA backends.
    pub kv_type_v: i32,
    /// Projector file for pictures in prompts (llama.cpp's `--mmproj`;
    /// `llm_ctx_params.mmproj_path`); `None`: text only.
    pub mmproj_path: Option<PathBuf>,
}

impl ContextParams {
    pub fn model_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.model_path = Some(path.into());
        self
    }
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }
    pub fn n_threads(mut self, n: i32) -> Self {
        self.n_threads = n;
        self
    }
    pub fn n_ctx(mut self, n: i32) -> Self {
        self.n_ctx = n;
        self
    }
    /// K's and V's KV cache element types (`sys::LLM_KV_*`; V 0: as K).
    pub fn kv_types(mut self, k: i32, v: i32) -> Self {
        self.kv_type = k;
        self.kv_type_v = v;
        self
    }
    pub fn mmproj_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.mmproj_path = Some(path.into());
        self
    }
}

/// Sampling settings. `Default` takes the library's defaults
/// (`llm_sampling_params_init`); [`SamplingParams::greedy`] is argmax.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingParams {
    pub temperature: f32,
    pub top_k: i32,
    pub top_p: f32,
    pub min_p: f32,
    pub repetition_penalty: f32,
    pub frequency_penalty: f32,
    pub presence_penalty: f32,
    pub penalty_last_n: i32,
    /// `None` draws a random seed.
    pub seed: Option<u64>,
    /// (token id, bias) added to the raw logits: a bias in [-100, 100], or
    /// `f32::NEG_INFINITY` to ban the token; each token at most once.
    pub logit_bias: Vec<(i32, f32)>,
}

impl Default for SamplingParams {
    fn default() -> Self {
        // SAFETY: init only writes the struct it is given.
        let p = unsafe { sys::init_struct(sys::llm_sampling_params_init) };
        SamplingParams {
            temperature: p.temperature,
            top_k: p.top_k,
            top_p: p.top_p,
            min_p: p.min_p,
            repetition_penalty: p.repetition_penalty,
            frequency_penalty: p.frequency_penalty,
            presence_penalty: p.presence_penalty,
            penalty_last_n: p.penalty_last_n,
            seed: if p.seed == sys::LLM_SEED_RANDOM { None } else { Some(p.seed) },
            logit_bias: Vec::new(),
        }
    }
}

impl SamplingParams {
    /// Temperature 0: always the most likely token.
    pub fn greedy() -> Self {
        SamplingParams { temperature: 0.0, ..Default::default() }
    }

    /// Everything but `logit_bias`, which [`RawRequest`] points at its own copy.
    pub(crate) fn to_sys(&self) -> sys::llm_sampling_params {
        let mut p = unsafe { sys::init_struct(sys::llm_sampling_params_init) };
        p.temperature = self.temperature;
        p.top_k = self.top_k;
        p.top_p = self.top_p;
        p.min_p = self.min_p;
        p.repetition_penalty = self.repetition_penalty;
        p.frequency_penalty = self.frequency_penalty;
        p.presence_penalty = self.presence_penalty;
        p.penalty_last_n = self.penalty_last_n;
        p.seed = self.seed.unwrap_or(sys::LLM_SEED_RANDOM);
        p
    }
}

/// What the model continues: text (tokenized by the library), token ids
/// used verbatim, or text and pictures in order (`llm_request.parts`; the
/// context needs [`ContextParams::mmproj_path`] for pictures).
#[derive(Debug, Clone, PartialEq)]
pub enum Prompt {
    Text(String),
    Tokens(Vec<i32>),
    Parts(Vec<ContentPart>),
}

/// One part of a [`Prompt::Parts`] (`llm_content_part`).
#[derive(Debug, Clone, PartialEq)]
pub enum ContentPart {
    Text(String),
    /// The bytes of a PNG, JPEG or WebP file (the library sniffs the format).
    Image(Vec<u8>),
    /// `width` x `height` 8-bit RGB pixels, row after row.
    Rgb { pixels: Vec<u8>, width: i32, height: i32 },
}

/// What a request's output must match (`llm_request.constraint_kind`);
/// compiled at submit, where an invalid one is an `InvalidArgument` error.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Constraint {
    #[default]
    None,
    /// JSON text valid against this JSON Schema (JSON text).
    JsonSchema(String),
    /// Any JSON object.
    JsonObject,
    /// The whole output matches this regular expression.
    Regex(String),
    /// Exactly one of these strings.
    Choice(Vec<String>),
    /// This EBNF grammar (GBNF-compatible, root rule `root`).
    Grammar(String),
}

/// One generation request. Build it with [`Request::new`] and the setters.
#[derive(Debug, Clone)]
pub struct Request {
    pub prompt: Prompt,
    pub max_tokens: i32,
    pub sampling: SamplingParams,
    /// Stop strings (not included in the output).
    pub stop: Vec<String>,
    pub ignore_eos: bool,
    /// Parallel samples from one prompt.
    pub n: i32,
    pub priority: i32,
    /// Add BOS as the model's metadata says (text prompts).
    pub add_special: bool,
    /// Text like "<s>" becomes the special token (text prompts).
    pub parse_special: bool,
    /// Token ids that end a sequence like EOS (even with `ignore_eos`).
    pub stop_token_ids: Vec<i32>,
    /// EOS and `stop_token_ids` are masked until this many tokens exist.
    pub min_tokens: i32,
    /// Alternatives (0..=20) each token event carries in `top_logprobs`.
    pub top_logprobs: i32,
    /// What the output must match.
    pub constraint: Constraint,
    /// JSON constraints: any JSON whitespace between tokens instead of the
    /// bounded layout (none, one space, or a newline and indentation by
    /// depth; `LLM_WHITESPACE_FREE`).
    pub whitespace_flexible: bool,
}

impl Request {
    pub fn new(prompt: impl Into<String>) -> Request {
        Request::with_prompt(Prompt::Text(prompt.into()))
    }

    pub fn from_tokens(tokens: Vec<i32>) -> Request {
        Request::with_prompt(Prompt::Tokens(tokens))
    }

    /// A prompt of text and pictures in order.
    pub fn from_parts(parts: Vec<ContentPart>) -> Request {
        Request::with_prompt(Prompt::Parts(parts))
    }

    fn with_prompt(prompt: Prompt) -> Request {
        Request {
            prompt,
            max_tokens: 256,
            sampling: SamplingParams::default(),
            stop: Vec::new(),
            ignore_eos: false,
            n: 1,
            priority: 0,
            add_special: true,
            parse_special: false,
            stop_token_ids: Vec::new(),
            min_tokens: 0,
            top_logprobs: 0,
            constraint: Constraint::None,
            whitespace_flexible: false,
        }
    }

    pub fn max_tokens(mut self, n: i32) -> Self {
        self.max_tokens = n;
        self
    }
    pub fn sampling(mut self, s: SamplingParams) -> Self {
        self.sampling = s;
        self
    }
    pub fn greedy(self) -> Self {
        self.sampling(SamplingParams::greedy())
    }
    pub fn temperature(mut self, t: f32) -> Self {
        self.sampling.temperature = t;
        self
    }
    pub fn seed(mut self, seed: u64) -> Self {
        self.sampling.seed = Some(seed);
        self
    }
    pub fn stop(mut self, s: impl Into<String>) -> Self {
        self.stop.push(s.into());
        self
    }
    pub fn n(mut self, n: i32) -> Self {
        self.n = n;
        self
    }
    pub fn priority(mut self, p: i32) -> Self {
        self.priority = p;
        self
    }
    pub fn ignore_eos(mut self, yes: bool) -> Self {
        self.ignore_eos = yes;
        self
    }
    /// Adds `bias` to token `token`'s logit at every step.
    pub fn logit_bias(mut self, token: i32, bias: f32) -> Self {
        self.sampling.logit_bias.push((token, bias));
        self
    }
    pub fn stop_token(mut self, token: i32) -> Self {
        self.stop_token_ids.push(token);
        self
    }
    pub fn min_tokens(mut self, n: i32) -> Self {
        self.min_tokens = n;
        self
    }
    pub fn top_logprobs(mut self, k: i32) -> Self {
        self.top_logprobs = k;
        self
    }
    pub fn constraint(mut self, c: Constraint) -> Self {
        self.constraint = c;
        self
    }
    pub fn whitespace_flexible(mut self, on: bool) -> Self {
        self.whitespace_flexible = on;
        self
    }
}

/// The C view of a [`Request`]: owns every buffer the `llm_request` points
/// into, so it must outlive the `llm_submit` call (the library copies).
pub(crate) struct RawRequest {
    pub req: sys::llm_request,
    _prompt: Option<CString>,
    _tokens: Vec<i32>,
    _sampling: Box<sys::llm_sampling_params>,
    _bias: Vec<sys::llm_logit_bias>,
    _stop_tokens: Vec<i32>,
    _stop: Vec<CString>,
    _stop_ptrs: Vec<*const std::os::raw::c_char>,
    _constraint: Option<CString>,
    _choices: Vec<CString>,
    _choice_ptrs: Vec<*const std::os::raw::c_char>,
    _parts: Vec<sys::llm_content_part>,
    _part_texts: Vec<CString>,
    _part_data: Vec<Vec<u8>>,
}

/// The `llm_content_part`s of `parts`, with the texts and bytes they point
/// into (moving the vectors moves no heap buffer, so the pointers stay).
fn raw_parts(parts: &[ContentPart]) -> Result<(Vec<sys::llm_content_part>, Vec<CString>, Vec<Vec<u8>>), Error> {
    let mut raw = Vec::with_capacity(parts.len());
    let mut texts = Vec::new();
    let mut data = Vec::new();
    for part in parts {
        let mut p = unsafe { sys::init_struct(sys::llm_content_part_init) };
        match part {
            ContentPart::Text(t) => {
                texts.push(cstring(t, "text part")?);
                p.text = texts.last().unwrap().as_ptr();
            }
            ContentPart::Image(bytes) => {
                p.kind = sys::LLM_CONTENT_IMAGE;
                data.push(bytes.clone());
            }
            ContentPart::Rgb { pixels, width, height } => {
                p.kind = sys::LLM_CONTENT_IMAGE_RGB;
                p.width = *width;
                p.height = *height;
                data.push(pixels.clone());
            }
        }
        if !matches!(part, ContentPart::Text(_)) {
            let d = data.last().unwrap();
            p.data = if d.is_empty() { std::ptr::null() } else { d.as_ptr().cast() };
            p.n_data = d.len();
        }
        raw.push(p);
    }
    Ok((raw, texts, data))
}

fn cstring(s: &str, what: &str) -> Result<CString, Error> {
    CString::new(s).map_err(|_| Error::new(Status::InvalidArgument, format!("{what} contains a NUL byte")))
}

impl RawRequest {
    pub fn new(r: &Request) -> Result<RawRequest, Error> {
        let mut req = unsafe { sys::init_struct(sys::llm_request_init) };
        let bias: Vec<sys::llm_logit_bias> =
            r.sampling.logit_bias.iter().map(|&(token, bias)| sys::llm_logit_bias { token, bias }).collect();
        let mut sampling = Box::new(r.sampling.to_sys());
        sampling.logit_bias = if bias.is_empty() { std::ptr::null() } else { bias.as_ptr() };
        sampling.n_logit_bias = bias.len() as i32;
        let stop_tokens = r.stop_token_ids.clone();
        let stop: Vec<CString> = r.stop.iter().map(|s| cstring(s, "stop string")).collect::<Result<_, _>>()?;
        let stop_ptrs: Vec<_> = stop.iter().map(|s| s.as_ptr()).collect();
        let (prompt, tokens) = match &r.prompt {
            Prompt::Text(t) => (Some(cstring(t, "prompt")?), Vec::new()),
            Prompt::Tokens(t) => (None, t.clone()),
            Prompt::Parts(_) => (None, Vec::new()),
        };
        let (parts, part_texts, part_data) = match &r.prompt {
            Prompt::Parts(p) => raw_parts(p)?,
            _ => (Vec::new(), Vec::new(), Vec::new()),
        };
        req.parts = if parts.is_empty() { std::ptr::null() } else { parts.as_ptr() };
        req.n_parts = parts.len() as i32;
        req.tokenize_flags = (if r.add_special { sys::LLM_TOKENIZE_ADD_SPECIAL } else { 0 })
            | (if r.parse_special { sys::LLM_TOKENIZE_PARSE_SPECIAL } else { 0 });
        req.prompt = prompt.as_ref().map_or(std::ptr::null(), |p| p.as_ptr());
        req.prompt_tokens = if tokens.is_empty() { std::ptr::null() } else { tokens.as_ptr() };
        req.n_prompt_tokens = tokens.len() as i32;
        req.max_tokens = r.max_tokens;
        req.sampling = &*sampling;
        req.stop = if stop_ptrs.is_empty() { std::ptr::null() } else { stop_ptrs.as_ptr() };
        req.n_stop = stop_ptrs.len() as i32;
        req.ignore_eos = r.ignore_eos as i32;
        req.n = r.n;
        req.priority = r.priority;
        req.stop_token_ids = if stop_tokens.is_empty() { std::ptr::null() } else { stop_tokens.as_ptr() };
        req.n_stop_token_ids = stop_tokens.len() as i32;
        req.min_tokens = r.min_tokens;
        req.top_logprobs = r.top_logprobs;
        let (kind, text, choices) = match &r.constraint {
            Constraint::None => (sys::LLM_CONSTRAINT_NONE, None, Vec::new()),
            Constraint::JsonSchema(t) => (sys::LLM_CONSTRAINT_JSON_SCHEMA, Some(cstring(t, "schema")?), Vec::new()),
            Constraint::JsonObject => (sys::LLM_CONSTRAINT_JSON_OBJECT, None, Vec::new()),
            Constraint::Regex(t) => (sys::LLM_CONSTRAINT_REGEX, Some(cstring(t, "regex")?), Vec::new()),
            Constraint::Grammar(t) => (sys::LLM_CONSTRAINT_GRAMMAR, Some(cstring(t, "grammar")?), Vec::new()),
            Constraint::Choice(c) => (
                sys::LLM_CONSTRAINT_CHOICE,
                None,
                c.iter().map(|s| cstring(s, "choice")).collect::<Result<Vec<_>, _>>()?,
            ),
        };
        let choice_ptrs: Vec<_> = choices.iter().map(|s| s.as_ptr()).collect();
        req.constraint_kind = kind;
        req.constraint_whitespace = i32::from(r.whitespace_flexible);
        req.constraint = text.as_ref().map_or(std::ptr::null(), |t| t.as_ptr());
        req.choices = if choice_ptrs.is_empty() { std::ptr::null() } else { choice_ptrs.as_ptr() };
        req.n_choices = choice_ptrs.len() as i32;
        Ok(RawRequest {
            req,
            _prompt: prompt,
            _tokens: tokens,
            _sampling: sampling,
            _bias: bias,
            _stop_tokens: stop_tokens,
            _stop: stop,
            _stop_ptrs: stop_ptrs,
            _constraint: text,
            _choices: choices,
            _choice_ptrs: choice_ptrs,
            _parts: parts,
            _part_texts: part_texts,
            _part_data: part_data,
        })
    }
}
