//! A hand-written mirror of `include/llm.h` (no bindgen offline).
//!
//! Names, field order and types follow the header one to one, so the C
//! documentation applies unchanged. `tests/layout.rs` compiles a probe against
//! the real header and fails if any struct size, field offset, field list or
//! constant differs from this file.
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_void};

pub type llm_status = i32;
pub type llm_token = i32;
pub type llm_request_id = u64;

/// Opaque context handle.
#[repr(C)]
pub struct llm_ctx {
    _private: [u8; 0],
}

pub const LLM_VERSION_MAJOR: i64 = 0;
pub const LLM_VERSION_MINOR: i64 = 1;
pub const LLM_VERSION_PATCH: i64 = 0;
pub const LLM_MAX_DEVICES: i64 = 16;
pub const LLM_VERSION_NUMBER: i64 = LLM_VERSION_MAJOR * 10000 + LLM_VERSION_MINOR * 100 + LLM_VERSION_PATCH;

pub const LLM_OK: llm_status = 0;
pub const LLM_ERR_INVALID_ARGUMENT: llm_status = 1;
pub const LLM_ERR_NULL_ARGUMENT: llm_status = 2;
pub const LLM_ERR_STRUCT_SIZE: llm_status = 3;
pub const LLM_ERR_IO: llm_status = 4;
pub const LLM_ERR_MODEL_FORMAT: llm_status = 5;
pub const LLM_ERR_UNSUPPORTED: llm_status = 6;
pub const LLM_ERR_OUT_OF_MEMORY: llm_status = 7;
pub const LLM_ERR_BUSY: llm_status = 8;
pub const LLM_ERR_NOT_FOUND: llm_status = 9;
pub const LLM_ERR_CONTEXT_OVERFLOW: llm_status = 10;
pub const LLM_ERR_INVALID_UTF8: llm_status = 11;
pub const LLM_ERR_BUFFER_TOO_SMALL: llm_status = 12;
pub const LLM_ERR_BACKEND: llm_status = 13;
pub const LLM_ERR_SHUTDOWN: llm_status = 14;
pub const LLM_ERR_INTERNAL: llm_status = 15;
pub const LLM_ERR_KV_MISMATCH: llm_status = 16;
pub const LLM_ERR_KV_CORRUPT: llm_status = 17;

pub const LLM_BACKEND_AUTO: i32 = 0;
pub const LLM_BACKEND_CPU: i32 = 1;
pub const LLM_BACKEND_CUDA: i32 = 2;

/// `llm_ctx_params.n_gpu_layers` besides a layer count: every layer on the
/// GPU (the default), or as many as fit the devices' free memory.
pub const LLM_GPU_LAYERS_ALL: i32 = -1;
pub const LLM_GPU_LAYERS_AUTO: i32 = -2;

pub const LLM_SPEC_AUTO: i32 = 0;
pub const LLM_SPEC_OFF: i32 = 1;
pub const LLM_SPEC_NGRAM: i32 = 2;
pub const LLM_SPEC_DRAFT: i32 = 3;
pub const LLM_PREEMPT_RECOMPUTE: i32 = 0;
pub const LLM_PREEMPT_SWAP: i32 = 1;
pub const LLM_KV_AUTO: i32 = 0;
pub const LLM_KV_F32: i32 = 1;
pub const LLM_KV_F16: i32 = 2;
pub const LLM_KV_Q8_0: i32 = 3;
pub const LLM_KV_Q4_0: i32 = 4;
pub const LLM_KV_FP8_E4M3: i32 = 5;
pub const LLM_KV_ROLE_NONE: i32 = 0;
pub const LLM_KV_ROLE_PRODUCER: i32 = 1;
pub const LLM_KV_ROLE_CONSUMER: i32 = 2;
pub const LLM_KV_ROLE_BOTH: i32 = 3;

pub const LLM_EVENT_TOKEN: i32 = 1;
pub const LLM_EVENT_FINAL: i32 = 2;

pub const LLM_FINISH_NONE: i32 = 0;
pub const LLM_FINISH_STOP: i32 = 1;
pub const LLM_FINISH_LENGTH: i32 = 2;
pub const LLM_FINISH_CANCELLED: i32 = 3;
pub const LLM_FINISH_ERROR: i32 = 4;

pub const LLM_TOKENIZE_ADD_SPECIAL: u32 = 1;
pub const LLM_TOKENIZE_PARSE_SPECIAL: u32 = 2;

pub const LLM_DETOKENIZE_RENDER_SPECIAL: u32 = 1;
pub const LLM_DETOKENIZE_STRIP_LEADING_SPACE: u32 = 2;

pub const LLM_SEED_RANDOM: u64 = u64::MAX;

pub const LLM_CONSTRAINT_NONE: i32 = 0;
pub const LLM_CONSTRAINT_JSON_SCHEMA: i32 = 1;
pub const LLM_CONSTRAINT_JSON_OBJECT: i32 = 2;
pub const LLM_CONSTRAINT_REGEX: i32 = 3;
pub const LLM_CONSTRAINT_CHOICE: i32 = 4;
pub const LLM_CONSTRAINT_GRAMMAR: i32 = 5;
pub const LLM_WHITESPACE_BOUNDED: i32 = 0;
pub const LLM_WHITESPACE_FREE: i32 = 1;

// llm_reasoning_format / llm_part (issue 32)
pub const LLM_REASONING_NONE: i32 = 0;
pub const LLM_REASONING_DEEPSEEK: i32 = 1;
pub const LLM_REASONING_HARMONY: i32 = 2;
pub const LLM_REASONING_AUTO: i32 = 3;
pub const LLM_PART_CONTENT: i32 = 0;
pub const LLM_PART_REASONING: i32 = 1;

// llm_content_kind (issue 36: images in the prompt)
pub const LLM_CONTENT_TEXT: i32 = 0;
pub const LLM_CONTENT_IMAGE: i32 = 1;
pub const LLM_CONTENT_IMAGE_RGB: i32 = 2;

pub const LLM_TOOL_FORMAT_AUTO: i32 = 0;
pub const LLM_TOOL_FORMAT_GENERIC: i32 = 1;
pub const LLM_TOOL_FORMAT_HERMES: i32 = 2;
pub const LLM_TOOL_FORMAT_LLAMA3: i32 = 3;
pub const LLM_TOOL_FORMAT_MISTRAL: i32 = 4;

/// Runs one of the `llm_*_init` functions safely. They write the struct as
/// the *loaded library* knows it, which may be larger than this mirror (a
/// newer library), so they write into a roomy buffer; the mirror's part is
/// copied out and `struct_size` set to the mirror's size, which every newer
/// library accepts.
///
/// # Safety
/// `T` must be one of the parameter structs of this module (plain data
/// starting with `uint32_t struct_size`) and `init` its init function.
pub unsafe fn init_struct<T: Copy>(init: unsafe extern "C" fn(*mut T) -> llm_status) -> T {
    let mut buf = [0u64; 256];
    assert!(std::mem::size_of::<T>() <= std::mem::size_of_val(&buf));
    init(buf.as_mut_ptr().cast());
    let mut v: T = std::ptr::read(buf.as_ptr().cast());
    *(&mut v as *mut T as *mut u32) = std::mem::size_of::<T>() as u32;
    v
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct llm_ctx_params {
    pub struct_size: u32,
    pub backend: i32,
    pub model_path: *const c_char,
    pub n_threads: i32,
    pub n_ctx: i32,
    pub kv_block_size: i32,
    pub n_kv_blocks: i32,
    pub max_seqs: i32,
    pub max_batch_tokens: i32,
    pub max_queued: i32,
    pub preempt_mode: i32,
    // appended in 0.1: speculative decoding
    pub draft_model_path: *const c_char,
    pub self_draft_layers: i32,
    pub spec_mode: i32,
    pub spec_k: i32,
    pub reserved1: i32,
    // appended in 0.1: GPU memory
    pub gpu_memory_fraction: f32,
    pub reserved2: i32,
    // appended in 0.1: preemption by swapping
    pub swap_space_bytes: u64,
    // appended in 0.3: KV cache element type
    pub kv_type: i32,
    pub kv_type_v: i32, // 0.6 (issue 32), was reserved3: V's type, 0 = as kv_type
    // appended in 0.3: partial offload
    pub n_gpu_layers: i32,
    pub reserved4: i32,
    // appended in 0.4: KV tiers under the prefix cache
    pub kv_host_bytes: u64,
    pub kv_disk_dir: *const c_char,
    pub kv_disk_bytes: u64,
    // appended in 0.5: prefill/decode disaggregation (issue 33)
    pub kv_role: i32,
    pub kv_lease_ms: i32,
    pub kv_listen_addr: *const c_char,
    // appended in 0.6: MoE experts in host memory (issue 35)
    pub n_cpu_moe: i32,
    pub moe_host_policy: i32,
    pub moe_cache_bytes: u64,
    pub moe_prefetch: i32,
    pub reserved5: i32,
    // appended in 0.6: several GPUs (issue 35)
    pub main_gpu: i32,
    pub tensor_split: [f32; LLM_MAX_DEVICES as usize],
    // appended in 0.7: images in the prompt (issue 36)
    pub reserved6: i32,
    pub mmproj_path: *const c_char,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct llm_device_stats {
    pub struct_size: u32,
    pub device: i32,
    pub first_layer: i32,
    pub end_layer: i32,
    pub n_devices: i32,
    pub reserved: i32,
    pub weight_bytes: u64,
    pub kv_pool_bytes: u64,
    pub used_bytes: u64,
    pub total_bytes: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct llm_sampling_params {
    pub struct_size: u32,
    pub temperature: f32,
    pub top_k: i32,
    pub top_p: f32,
    pub min_p: f32,
    pub repetition_penalty: f32,
    pub frequency_penalty: f32,
    pub presence_penalty: f32,
    pub penalty_last_n: i32,
    pub seed: u64,
    // appended in 0.2
    pub logit_bias: *const llm_logit_bias,
    pub n_logit_bias: i32,
    pub reserved1: i32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct llm_logit_bias {
    pub token: llm_token,
    pub bias: f32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct llm_top_logprob {
    pub token: llm_token,
    pub logprob: f32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct llm_metrics {
    pub prompt_tokens: i32,
    pub cached_prompt_tokens: i32,
    pub generated_tokens: i32,
    pub draft_tokens_proposed: i32,
    pub draft_tokens_accepted: i32,
    pub preemptions: i32,
    pub queue_ms: f64,
    pub ttft_ms: f64,
    pub tpot_ms: f64,
    pub total_ms: f64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct llm_event {
    pub struct_size: u32,
    /// `type` in C.
    pub type_: i32,
    pub request_id: llm_request_id,
    pub seq_index: i32,
    pub token: llm_token,
    pub text: *const c_char,
    pub text_len: u32,
    pub logprob: f32,
    pub finish_reason: i32,
    pub status: llm_status,
    pub message: *const c_char,
    pub metrics: llm_metrics,
    pub prompt_logprobs: *const f32,
    pub n_prompt_logprobs: i32,
    pub reserved0: i32,
    // appended in 0.2
    pub top_logprobs: *const llm_top_logprob,
    pub n_top_logprobs: i32,
    pub reserved1: i32,
    // appended in 0.4: embeddings
    pub embedding: *const f32,
    pub n_embedding: i32,
    pub n_embedding_rows: i32,
    // appended in 0.5: prefill/decode disaggregation (issue 33)
    pub kv_transfer_desc: *const c_char,
    pub transferred_prompt_tokens: i32,
    pub kv_transfer_status: i32,
    // appended in 0.6: reasoning output (issue 32)
    pub reasoning_text: *const c_char,
    pub reasoning_text_len: u32,
    pub part: i32,
}

/// One part of a prompt or chat message: text or a picture (issue 36).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct llm_content_part {
    pub struct_size: u32,
    pub kind: i32,
    pub text: *const c_char,
    pub data: *const c_void,
    pub n_data: usize,
    pub width: i32,
    pub height: i32,
}

/// A chat turn whose content is parts (issue 36).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct llm_chat_message_v2 {
    pub struct_size: u32,
    pub n_parts: i32,
    pub role: *const c_char,
    pub parts: *const llm_content_part,
}

pub type llm_event_callback = Option<unsafe extern "C" fn(event: *const llm_event, user_data: *mut c_void)>;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct llm_request {
    pub struct_size: u32,
    pub tokenize_flags: u32,
    pub prompt: *const c_char,
    pub prompt_tokens: *const llm_token,
    pub n_prompt_tokens: i32,
    pub max_tokens: i32,
    pub sampling: *const llm_sampling_params,
    pub stop: *const *const c_char,
    pub n_stop: i32,
    pub ignore_eos: i32,
    pub n: i32,
    pub priority: i32,
    pub prompt_logprobs: i32,
    pub reserved0: i32,
    pub callback: llm_event_callback,
    pub user_data: *mut c_void,
    // appended in 0.1
    pub cache_salt: u64,
    pub spec_mode: i32,
    pub spec_k: i32,
    // appended in 0.2
    pub stop_token_ids: *const llm_token,
    pub n_stop_token_ids: i32,
    pub min_tokens: i32,
    pub top_logprobs: i32,
    pub reserved1: i32,
    // appended in 0.3: constrained decoding
    pub constraint_kind: i32,
    pub n_choices: i32,
    pub constraint: *const c_char,
    pub choices: *const *const c_char,
    // appended in 0.4: embeddings (issue 31)
    pub task: i32,
    pub pooling: i32,
    pub normalize: i32,
    pub dimensions: i32,
    pub truncate: i32,
    pub reserved2: i32,
    // appended in 0.4: KV kept (issue 30)
    pub keep_kv: i32,
    pub constraint_whitespace: i32, // LLM_WHITESPACE_* (0.4's reserved3)
    // appended in 0.5: prefill/decode disaggregation (issue 33)
    pub kv_transfer_desc: *const c_char,
    pub kv_produce: i32,
    pub reserved4: i32,
    // appended in 0.6: reasoning output (issue 32)
    pub reasoning_format: i32,
    pub reserved5: i32,
    // appended in 0.7: images in the prompt (issue 36)
    pub parts: *const llm_content_part,
    pub n_parts: i32,
    pub reserved6: i32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct llm_stats {
    pub struct_size: u32,
    pub backend: i32,
    pub requests_submitted: u64,
    pub requests_finished: u64,
    pub prompt_tokens: u64,
    pub generated_tokens: u64,
    pub steps: u64,
    pub queue_depth: i32,
    pub running: i32,
    pub kv_blocks_total: i32,
    pub kv_blocks_used: i32,
    pub kv_blocks_free: i32,
    pub kv_blocks_cached: i32,
    pub uptime_s: f64,
    pub prompt_tokens_per_s: f64,
    pub generated_tokens_per_s: f64,
    // appended in 0.1
    pub prefix_cache_queried_tokens: u64,
    pub prefix_cache_hit_tokens: u64,
    pub preemptions: u64,
    pub waiting: i32,
    pub reserved1: i32,
    pub kv_utilization: f64,
    // appended in 0.1: speculative decoding
    pub draft_tokens_proposed: u64,
    pub draft_tokens_accepted: u64,
    pub spec_rounds: u64,
    // appended in 0.1: preemption by swapping
    pub swap_outs: u64,
    pub swap_ins: u64,
    pub swap_blocks_out: u64,
    pub swap_blocks_in: u64,
    pub swap_blocks_total: i32,
    pub swap_blocks_used: i32,
    // appended in 0.3: memory held (bytes)
    pub kv_bytes: u64,
    pub kv_pool_bytes: u64,
    pub weight_bytes: u64,
    pub scratch_bytes: u64,
    // appended in 0.4: KV tiers
    pub kv_tier_host_hit_tokens: u64,
    pub kv_tier_disk_hit_tokens: u64,
    pub kv_tier_bytes_down: u64,
    pub kv_tier_bytes_up: u64,
    pub kv_tier_host_bytes: u64,
    pub kv_tier_disk_bytes: u64,
    pub kv_tier_files_refused: u64,
    pub kv_imports_refused: u64,
    pub kv_tier_disk_on: i32,
    pub reserved2: i32,
    // appended in 0.5: prefill/decode disaggregation (issue 33)
    pub kv_xfer_pulls: u64,
    pub kv_xfer_fallbacks: u64,
    pub kv_xfer_bytes: u64,
    pub kv_xfer_tokens: u64,
    pub kv_xfer_seconds: f64,
    pub kv_xfer_served: u64,
    pub kv_xfer_bytes_served: u64,
    pub kv_leases_expired: u64,
    pub kv_lease_bytes: u64,
    pub kv_leases_active: i32,
    pub kv_role: i32,
    // appended in 0.6: MoE experts in host memory (issue 35)
    pub moe_host_layers: i32,
    pub moe_cache_slots: i32,
    pub moe_cache_bytes: u64,
    pub moe_host_bytes: u64,
    pub moe_cpu_steps: u64,
    pub moe_copy_steps: u64,
    pub moe_bytes_copied: u64,
    pub moe_cache_hits: u64,
    pub moe_cache_misses: u64,
    pub moe_tokens: u64,
    pub moe_prefetch_experts: u64,
    pub moe_prefetch_used: u64,
    pub moe_predicted_wanted: u64,
    pub moe_predicted_right: u64,
    // appended in 0.7: images in the prompt (issue 36)
    pub images_encoded: u64,
    pub image_cache_hits: u64,
    pub image_tokens: u64,
    pub image_encode_seconds: f64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct llm_model_info {
    pub struct_size: u32,
    pub n_vocab: i32,
    pub n_ctx_train: i32,
    pub n_ctx: i32,
    pub n_embd: i32,
    pub n_layer: i32,
    pub n_head: i32,
    pub n_head_kv: i32,
    pub bos: llm_token,
    pub eos: llm_token,
    pub n_params: i64,
    pub arch: *const c_char,
    pub name: *const c_char,
}

// appended in 0.4: embeddings (issue 31)
pub const LLM_TASK_GENERATE: i32 = 0;
pub const LLM_TASK_EMBED: i32 = 1;
pub const LLM_POOLING_MODEL: i32 = -1;
pub const LLM_POOLING_NONE: i32 = 0;
pub const LLM_POOLING_MEAN: i32 = 1;
pub const LLM_POOLING_CLS: i32 = 2;
pub const LLM_POOLING_LAST: i32 = 3;
pub const LLM_POOLING_RANK: i32 = 4;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct llm_embed_params {
    pub struct_size: u32,
    pub pooling: i32,
    pub normalize: i32,
    pub dimensions: i32,
    pub truncate: i32,
    pub tokenize_flags: u32,
    pub priority: i32,
    pub reserved0: i32,
}

extern "C" {
    pub fn llm_embed_params_init(params: *mut llm_embed_params) -> llm_status;
    pub fn llm_embed(
        ctx: *mut llm_ctx,
        texts: *const *const c_char,
        tokens: *const *const llm_token,
        n_tokens: *const i32,
        n_inputs: i32,
        params: *const llm_embed_params,
        out: *mut f32,
        out_capacity: usize,
        out_dim: *mut i32,
    ) -> llm_status;
    pub fn llm_rerank_tokenize(
        ctx: *mut llm_ctx,
        query: *const c_char,
        document: *const c_char,
        out: *mut llm_token,
        capacity: i32,
        n_out: *mut i32,
    ) -> llm_status;
}

extern "C" {
    pub fn llm_content_part_init(part: *mut llm_content_part) -> llm_status;
    pub fn llm_chat_apply_template_v2(
        ctx: *mut llm_ctx,
        tmpl: *const c_char,
        messages: *const llm_chat_message_v2,
        n_messages: usize,
        add_generation_prompt: i32,
        out: *mut c_char,
        capacity: usize,
        n_out: *mut usize,
    ) -> llm_status;
    pub fn llm_chat_tool_format(ctx: *mut llm_ctx, tmpl: *const c_char, out_format: *mut i32) -> llm_status;
    pub fn llm_chat_parse_tool_calls(
        format: i32,
        text: *const c_char,
        text_len: usize,
        out: *mut c_char,
        capacity: usize,
        n_out: *mut usize,
    ) -> llm_status;
    pub fn llm_version() -> *const c_char;
    pub fn llm_version_number() -> u32;
    pub fn llm_status_str(status: llm_status) -> *const c_char;
    pub fn llm_last_error() -> *const c_char;
    pub fn llm_ctx_params_init(params: *mut llm_ctx_params) -> llm_status;
    pub fn llm_sampling_params_init(params: *mut llm_sampling_params) -> llm_status;
    pub fn llm_request_init(request: *mut llm_request) -> llm_status;
    pub fn llm_ctx_create(params: *const llm_ctx_params, out_ctx: *mut *mut llm_ctx) -> llm_status;
    pub fn llm_ctx_destroy(ctx: *mut llm_ctx);
    pub fn llm_submit(ctx: *mut llm_ctx, request: *const llm_request, out_id: *mut llm_request_id) -> llm_status;
    pub fn llm_cancel(ctx: *mut llm_ctx, id: llm_request_id) -> llm_status;
    pub fn llm_kv_export_file(
        ctx: *mut llm_ctx,
        tokens: *const llm_token,
        n_tokens: i32,
        cache_salt: u64,
        path: *const c_char,
        out_n_tokens: *mut i32,
    ) -> llm_status;
    pub fn llm_kv_import_file(ctx: *mut llm_ctx, cache_salt: u64, path: *const c_char, out_n_tokens: *mut i32)
        -> llm_status;
    pub fn llm_poll(
        ctx: *mut llm_ctx,
        events: *mut llm_event,
        capacity: u32,
        n_out: *mut u32,
        timeout_ms: i32,
    ) -> llm_status;
    pub fn llm_wakeup(ctx: *mut llm_ctx) -> llm_status;
    pub fn llm_get_stats(ctx: *mut llm_ctx, out: *mut llm_stats) -> llm_status;
    pub fn llm_get_device_stats(ctx: *mut llm_ctx, index: i32, out: *mut llm_device_stats) -> llm_status;
    pub fn llm_model_get_info(ctx: *mut llm_ctx, out: *mut llm_model_info) -> llm_status;
    pub fn llm_tokenize(
        ctx: *mut llm_ctx,
        text: *const c_char,
        text_len: usize,
        flags: u32,
        out: *mut llm_token,
        capacity: i32,
        n_out: *mut i32,
    ) -> llm_status;
    pub fn llm_detokenize(
        ctx: *mut llm_ctx,
        tokens: *const llm_token,
        n_tokens: i32,
        flags: u32,
        out: *mut c_char,
        capacity: usize,
        n_out: *mut usize,
    ) -> llm_status;
}
