//! Embeddings and reranking (issue 31): the blocking `llm_embed` over token
//! arrays or texts, and `llm_rerank_tokenize` for a (query, document) pair.

use crate::context::Context;
use crate::error::Error;
use crate::sys;
use std::ffi::CString;

/// How an embedding model's token vectors become one vector (`LLM_POOLING_*`).
/// `None` (a vector per token) is not reachable through the blocking call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pooling {
    /// The model file's `pooling_type`.
    #[default]
    Model,
    Mean,
    Cls,
    Last,
    /// A reranker's score(s); never normalised.
    Rank,
}

impl Pooling {
    fn raw(self) -> i32 {
        match self {
            Pooling::Model => sys::LLM_POOLING_MODEL,
            Pooling::Mean => sys::LLM_POOLING_MEAN,
            Pooling::Cls => sys::LLM_POOLING_CLS,
            Pooling::Last => sys::LLM_POOLING_LAST,
            Pooling::Rank => sys::LLM_POOLING_RANK,
        }
    }
}

/// Options of [`Context::embed`]; the default is the model's pooling,
/// L2-normalised, every dimension, long inputs refused.
#[derive(Debug, Clone, Copy, Default)]
pub struct EmbedOptions {
    pub pooling: Pooling,
    /// No L2 normalisation.
    pub raw: bool,
    /// Keep the first `dimensions` values (Matryoshka); 0 = all.
    pub dimensions: i32,
    /// Cut inputs longer than the context instead of failing.
    pub truncate: bool,
}

enum Inputs<'a> {
    Tokens(&'a [Vec<i32>]),
    Texts(&'a [&'a str]),
}

impl Context {
    /// One vector per input (token ids), through `llm_embed`: batched with
    /// whatever else the context runs, without the event stream. An empty
    /// input, one longer than the context, or a model that makes no
    /// embeddings is an [`Error`] with its status.
    pub fn embed(&self, inputs: &[Vec<i32>], opt: EmbedOptions) -> Result<Vec<Vec<f32>>, Error> {
        self.embed_inputs(Inputs::Tokens(inputs), opt)
    }

    /// [`Context::embed`] over texts, tokenized by the model's vocabulary.
    pub fn embed_texts(&self, texts: &[&str], opt: EmbedOptions) -> Result<Vec<Vec<f32>>, Error> {
        self.embed_inputs(Inputs::Texts(texts), opt)
    }

    /// The token ids of a (query, document) pair as the model's reranker
    /// reads it, for [`Context::embed`] with [`Pooling::Rank`].
    pub fn rerank_tokenize(&self, query: &str, document: &str) -> Result<Vec<i32>, Error> {
        let q = CString::new(query).map_err(|_| Error::new(crate::Status::InvalidArgument, "NUL in the query"))?;
        let d = CString::new(document).map_err(|_| Error::new(crate::Status::InvalidArgument, "NUL in the document"))?;
        let mut out = vec![0i32; query.len() + document.len() + 64];
        loop {
            let mut n = 0i32;
            let st = unsafe {
                sys::llm_rerank_tokenize(self.as_raw(), q.as_ptr(), d.as_ptr(), out.as_mut_ptr(), out.len() as i32, &mut n)
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

    fn embed_inputs(&self, inputs: Inputs<'_>, opt: EmbedOptions) -> Result<Vec<Vec<f32>>, Error> {
        let mut p = unsafe { sys::init_struct(sys::llm_embed_params_init) };
        p.pooling = opt.pooling.raw();
        p.normalize = i32::from(!opt.raw);
        p.dimensions = opt.dimensions;
        p.truncate = i32::from(opt.truncate);
        let (n, texts, ptrs, lens);
        match inputs {
            Inputs::Tokens(t) => {
                n = t.len();
                texts = Vec::new();
                ptrs = t.iter().map(|v| v.as_ptr()).collect::<Vec<_>>();
                lens = t.iter().map(|v| v.len() as i32).collect::<Vec<_>>();
            }
            Inputs::Texts(t) => {
                n = t.len();
                texts = t
                    .iter()
                    .map(|s| CString::new(*s))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|_| Error::new(crate::Status::InvalidArgument, "NUL in a text"))?;
                ptrs = Vec::new();
                lens = Vec::new();
            }
        }
        if n == 0 {
            return Ok(Vec::new());
        }
        let text_ptrs: Vec<*const std::os::raw::c_char> = texts.iter().map(|c| c.as_ptr()).collect();
        let call = |out: *mut f32, cap: usize, dim: &mut i32| unsafe {
            sys::llm_embed(
                self.as_raw(),
                if text_ptrs.is_empty() { std::ptr::null() } else { text_ptrs.as_ptr() },
                if ptrs.is_empty() { std::ptr::null() } else { ptrs.as_ptr() },
                if lens.is_empty() { std::ptr::null() } else { lens.as_ptr() },
                n as i32,
                &p,
                out,
                cap,
                dim,
            )
        };
        let mut dim = 0i32;
        let st = call(std::ptr::null_mut(), 0, &mut dim);
        if st != sys::LLM_ERR_BUFFER_TOO_SMALL {
            Error::check(st)?;
        }
        let d = dim.max(0) as usize;
        let mut out = vec![0f32; n * d];
        Error::check(call(out.as_mut_ptr(), out.len(), &mut dim))?;
        Ok(out.chunks(d.max(1)).take(n).map(<[f32]>::to_vec).collect())
    }
}
