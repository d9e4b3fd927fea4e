"""ctypes mirrors of the structs in include/llm.h (field for field, same order).

Each struct starts with ``struct_size``; the library accepts any size it has
shipped, so a mirror that lags the header keeps working, and
``tests/test_abi.py`` checks that these mirrors are the header's current size.
"""
from __future__ import annotations

import ctypes as C

llm_status = C.c_int32
llm_token = C.c_int32
llm_request_id = C.c_uint64

EVENT_CALLBACK = C.CFUNCTYPE(None, C.c_void_p, C.c_void_p)
KV_WRITE_FN = C.CFUNCTYPE(C.c_int32, C.c_void_p, C.c_void_p, C.c_size_t)
KV_READ_FN = C.CFUNCTYPE(C.c_int32, C.c_void_p, C.c_void_p, C.c_size_t, C.POINTER(C.c_size_t))

# llm_reasoning_format and llm_part (issue 32)
REASONING_NONE, REASONING_DEEPSEEK, REASONING_HARMONY, REASONING_AUTO = 0, 1, 2, 3
PART_CONTENT, PART_REASONING = 0, 1


MAX_DEVICES = 16  # LLM_MAX_DEVICES
GPU_LAYERS_ALL = -1  # LLM_GPU_LAYERS_ALL: every layer on the GPU
GPU_LAYERS_AUTO = -2  # LLM_GPU_LAYERS_AUTO: as many as fit the devices' free memory


class CtxParams(C.Structure):
    _fields_ = [
        ("struct_size", C.c_uint32),
        ("backend", C.c_int32),
        ("model_path", C.c_char_p),
        ("n_threads", C.c_int32),
        ("n_ctx", C.c_int32),
        ("kv_block_size", C.c_int32),
        ("n_kv_blocks", C.c_int32),
        ("max_seqs", C.c_int32),
        ("max_batch_tokens", C.c_int32),
        ("max_queued", C.c_int32),
        ("preempt_mode", C.c_int32),
        ("draft_model_path", C.c_char_p),
        ("self_draft_layers", C.c_int32),
        ("spec_mode", C.c_int32),
        ("spec_k", C.c_int32),
        ("reserved1", C.c_int32),
        ("gpu_memory_fraction", C.c_float),
        ("reserved2", C.c_int32),
        ("swap_space_bytes", C.c_uint64),
        ("kv_type", C.c_int32),
        ("kv_type_v", C.c_int32),  # 0.6 (issue 32), was reserved3: V's type, 0 = as kv_type
        ("n_gpu_layers", C.c_int32),
        ("reserved4", C.c_int32),
        ("kv_host_bytes", C.c_uint64),
        ("kv_disk_dir", C.c_char_p),
        ("kv_disk_bytes", C.c_uint64),
        ("kv_role", C.c_int32),
        ("kv_lease_ms", C.c_int32),
        ("kv_listen_addr", C.c_char_p),
        # appended in 0.6 (issue 35): MoE experts in host memory
        ("n_cpu_moe", C.c_int32),
        ("moe_host_policy", C.c_int32),
        ("moe_cache_bytes", C.c_uint64),
        ("moe_prefetch", C.c_int32),
        ("reserved5", C.c_int32),
        # appended in 0.6: several GPUs (issue 35)
        ("main_gpu", C.c_int32),
        ("tensor_split", C.c_float * MAX_DEVICES),
        # appended in 0.7: images in the prompt (issue 36)
        ("reserved6", C.c_int32),
        ("mmproj_path", C.c_char_p),
    ]


class LogitBias(C.Structure):
    _fields_ = [("token", llm_token), ("bias", C.c_float)]


class SamplingParams(C.Structure):
    _fields_ = [
        ("struct_size", C.c_uint32),
        ("temperature", C.c_float),
        ("top_k", C.c_int32),
        ("top_p", C.c_float),
        ("min_p", C.c_float),
        ("repetition_penalty", C.c_float),
        ("frequency_penalty", C.c_float),
        ("presence_penalty", C.c_float),
        ("penalty_last_n", C.c_int32),
        ("seed", C.c_uint64),
        ("logit_bias", C.POINTER(LogitBias)),
        ("n_logit_bias", C.c_int32),
        ("reserved1", C.c_int32),
    ]


class Metrics(C.Structure):
    _fields_ = [
        ("prompt_tokens", C.c_int32),
        ("cached_prompt_tokens", C.c_int32),
        ("generated_tokens", C.c_int32),
        ("draft_tokens_proposed", C.c_int32),
        ("draft_tokens_accepted", C.c_int32),
        ("preemptions", C.c_int32),
        ("queue_ms", C.c_double),
        ("ttft_ms", C.c_double),
        ("tpot_ms", C.c_double),
        ("total_ms", C.c_double),
    ]


class TopLogprob(C.Structure):
    _fields_ = [("token", llm_token), ("logprob", C.c_float)]


class Event(C.Structure):
    _fields_ = [
        ("struct_size", C.c_uint32),
        ("type", C.c_int32),
        ("request_id", llm_request_id),
        ("seq_index", C.c_int32),
        ("token", llm_token),
        ("text", C.c_void_p),  # bytes, read with text_len (may hold NULs? no: UTF-8 text)
        ("text_len", C.c_uint32),
        ("logprob", C.c_float),
        ("finish_reason", C.c_int32),
        ("status", llm_status),
        ("message", C.c_char_p),
        ("metrics", Metrics),
        ("prompt_logprobs", C.POINTER(C.c_float)),
        ("n_prompt_logprobs", C.c_int32),
        ("reserved0", C.c_int32),
        ("top_logprobs", C.POINTER(TopLogprob)),
        ("n_top_logprobs", C.c_int32),
        ("reserved1", C.c_int32),
        ("embedding", C.POINTER(C.c_float)),
        ("n_embedding", C.c_int32),
        ("n_embedding_rows", C.c_int32),
        ("kv_transfer_desc", C.c_char_p),
        ("transferred_prompt_tokens", C.c_int32),
        ("kv_transfer_status", C.c_int32),
        # appended in 0.6: reasoning output (issue 32)
        ("reasoning_text", C.c_void_p),  # bytes, read with reasoning_text_len
        ("reasoning_text_len", C.c_uint32),
        ("part", C.c_int32),  # PART_*
    ]


# llm_content_part.kind (issue 36)
CONTENT_TEXT, CONTENT_IMAGE, CONTENT_IMAGE_RGB = 0, 1, 2


class ContentPart(C.Structure):
    _fields_ = [
        ("struct_size", C.c_uint32),
        ("kind", C.c_int32),  # CONTENT_*
        ("text", C.c_char_p),
        ("data", C.c_void_p),
        ("n_data", C.c_size_t),
        ("width", C.c_int32),
        ("height", C.c_int32),
    ]


class ChatMessageV2(C.Structure):
    _fields_ = [
        ("struct_size", C.c_uint32),
        ("n_parts", C.c_int32),
        ("role", C.c_char_p),
        ("parts", C.POINTER(ContentPart)),
    ]


class Request(C.Structure):
    _fields_ = [
        ("struct_size", C.c_uint32),
        ("tokenize_flags", C.c_uint32),
        ("prompt", C.c_char_p),
        ("prompt_tokens", C.POINTER(llm_token)),
        ("n_prompt_tokens", C.c_int32),
        ("max_tokens", C.c_int32),
        ("sampling", C.POINTER(SamplingParams)),
        ("stop", C.POINTER(C.c_char_p)),
        ("n_stop", C.c_int32),
        ("ignore_eos", C.c_int32),
        ("n", C.c_int32),
        ("priority", C.c_int32),
        ("prompt_logprobs", C.c_int32),
        ("reserved0", C.c_int32),
        ("callback", C.c_void_p),
        ("user_data", C.c_void_p),
        ("cache_salt", C.c_uint64),
        ("spec_mode", C.c_int32),
        ("spec_k", C.c_int32),
        ("stop_token_ids", C.POINTER(llm_token)),
        ("n_stop_token_ids", C.c_int32),
        ("min_tokens", C.c_int32),
        ("top_logprobs", C.c_int32),
        ("reserved1", C.c_int32),
        ("constraint_kind", C.c_int32),
        ("n_choices", C.c_int32),
        ("constraint", C.c_char_p),
        ("choices", C.POINTER(C.c_char_p)),
        ("task", C.c_int32),
        ("pooling", C.c_int32),
        ("normalize", C.c_int32),
        ("dimensions", C.c_int32),
        ("truncate", C.c_int32),
        ("reserved2", C.c_int32),
        ("keep_kv", C.c_int32),
        ("constraint_whitespace", C.c_int32),  # LLM_WHITESPACE_* (0.4's reserved3)
        ("kv_transfer_desc", C.c_char_p),
        ("kv_produce", C.c_int32),
        ("reserved4", C.c_int32),
        ("reasoning_format", C.c_int32),  # REASONING_* (0.6, issue 32)
        ("reserved5", C.c_int32),
        ("parts", C.POINTER(ContentPart)),  # 0.7, issue 36
        ("n_parts", C.c_int32),
        ("reserved6", C.c_int32),
    ]


class DeviceStats(C.Structure):
    _fields_ = [
        ("struct_size", C.c_uint32),
        ("device", C.c_int32),
        ("first_layer", C.c_int32),
        ("end_layer", C.c_int32),
        ("n_devices", C.c_int32),
        ("reserved", C.c_int32),
        ("weight_bytes", C.c_uint64),
        ("kv_pool_bytes", C.c_uint64),
        ("used_bytes", C.c_uint64),
        ("total_bytes", C.c_uint64),
    ]


class Stats(C.Structure):
    _fields_ = [
        ("struct_size", C.c_uint32),
        ("backend", C.c_int32),
        ("requests_submitted", C.c_uint64),
        ("requests_finished", C.c_uint64),
        ("prompt_tokens", C.c_uint64),
        ("generated_tokens", C.c_uint64),
        ("steps", C.c_uint64),
        ("queue_depth", C.c_int32),
        ("running", C.c_int32),
        ("kv_blocks_total", C.c_int32),
        ("kv_blocks_used", C.c_int32),
        ("kv_blocks_free", C.c_int32),
        ("kv_blocks_cached", C.c_int32),
        ("uptime_s", C.c_double),
        ("prompt_tokens_per_s", C.c_double),
        ("generated_tokens_per_s", C.c_double),
        ("prefix_cache_queried_tokens", C.c_uint64),
        ("prefix_cache_hit_tokens", C.c_uint64),
        ("preemptions", C.c_uint64),
        ("waiting", C.c_int32),
        ("reserved1", C.c_int32),
        ("kv_utilization", C.c_double),
        ("draft_tokens_proposed", C.c_uint64),
        ("draft_tokens_accepted", C.c_uint64),
        ("spec_rounds", C.c_uint64),
        ("swap_outs", C.c_uint64),
        ("swap_ins", C.c_uint64),
        ("swap_blocks_out", C.c_uint64),
        ("swap_blocks_in", C.c_uint64),
        ("swap_blocks_total", C.c_int32),
        ("swap_blocks_used", C.c_int32),
        ("kv_bytes", C.c_uint64),
        ("kv_pool_bytes", C.c_uint64),
        ("weight_bytes", C.c_uint64),
        ("scratch_bytes", C.c_uint64),
        ("kv_tier_host_hit_tokens", C.c_uint64),
        ("kv_tier_disk_hit_tokens", C.c_uint64),
        ("kv_tier_bytes_down", C.c_uint64),
        ("kv_tier_bytes_up", C.c_uint64),
        ("kv_tier_host_bytes", C.c_uint64),
        ("kv_tier_disk_bytes", C.c_uint64),
        ("kv_tier_files_refused", C.c_uint64),
        ("kv_imports_refused", C.c_uint64),
        ("kv_tier_disk_on", C.c_int32),
        ("reserved2", C.c_int32),
        ("kv_xfer_pulls", C.c_uint64),
        ("kv_xfer_fallbacks", C.c_uint64),
        ("kv_xfer_bytes", C.c_uint64),
        ("kv_xfer_tokens", C.c_uint64),
        ("kv_xfer_seconds", C.c_double),
        ("kv_xfer_served", C.c_uint64),
        ("kv_xfer_bytes_served", C.c_uint64),
        ("kv_leases_expired", C.c_uint64),
        ("kv_lease_bytes", C.c_uint64),
        ("kv_leases_active", C.c_int32),
        ("kv_role", C.c_int32),
        # appended in 0.6 (issue 35): MoE experts in host memory
        ("moe_host_layers", C.c_int32),
        ("moe_cache_slots", C.c_int32),
        ("moe_cache_bytes", C.c_uint64),
        ("moe_host_bytes", C.c_uint64),
        ("moe_cpu_steps", C.c_uint64),
        ("moe_copy_steps", C.c_uint64),
        ("moe_bytes_copied", C.c_uint64),
        ("moe_cache_hits", C.c_uint64),
        ("moe_cache_misses", C.c_uint64),
        ("moe_tokens", C.c_uint64),
        ("moe_prefetch_experts", C.c_uint64),
        ("moe_prefetch_used", C.c_uint64),
        ("moe_predicted_wanted", C.c_uint64),
        ("moe_predicted_right", C.c_uint64),
        # appended in 0.7 (issue 36): images in the prompt
        ("images_encoded", C.c_uint64),
        ("image_cache_hits", C.c_uint64),
        ("image_tokens", C.c_uint64),
        ("image_encode_seconds", C.c_double),
    ]


class ModelInfo(C.Structure):
    _fields_ = [
        ("struct_size", C.c_uint32),
        ("n_vocab", C.c_int32),
        ("n_ctx_train", C.c_int32),
        ("n_ctx", C.c_int32),
        ("n_embd", C.c_int32),
        ("n_layer", C.c_int32),
        ("n_head", C.c_int32),
        ("n_head_kv", C.c_int32),
        ("bos", llm_token),
        ("eos", llm_token),
        ("n_params", C.c_int64),
        ("arch", C.c_char_p),
        ("name", C.c_char_p),
    ]


class ChatMessage(C.Structure):
    _fields_ = [("role", C.c_char_p), ("content", C.c_char_p)]


class EmbedParams(C.Structure):
    _fields_ = [
        ("struct_size", C.c_uint32),
        ("pooling", C.c_int32),
        ("normalize", C.c_int32),
        ("dimensions", C.c_int32),
        ("truncate", C.c_int32),
        ("tokenize_flags", C.c_uint32),
        ("priority", C.c_int32),
        ("reserved0", C.c_int32),
    ]
