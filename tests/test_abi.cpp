// Pins the public ABI: struct sizes, field offsets and constant values. A
// change here is an ABI break: only appending fields and constants is allowed.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <type_traits>

#include "llm.h"

#if INTPTR_MAX == INT64_MAX
#define LLM_ABI_64 1
#endif

TEST(Abi, StatusValues) {
  EXPECT_EQ(LLM_OK, 0);
  EXPECT_EQ(LLM_ERR_INVALID_ARGUMENT, 1);
  EXPECT_EQ(LLM_ERR_NULL_ARGUMENT, 2);
  EXPECT_EQ(LLM_ERR_STRUCT_SIZE, 3);
  EXPECT_EQ(LLM_ERR_IO, 4);
  EXPECT_EQ(LLM_ERR_MODEL_FORMAT, 5);
  EXPECT_EQ(LLM_ERR_UNSUPPORTED, 6);
  EXPECT_EQ(LLM_ERR_OUT_OF_MEMORY, 7);
  EXPECT_EQ(LLM_ERR_BUSY, 8);
  EXPECT_EQ(LLM_ERR_NOT_FOUND, 9);
  EXPECT_EQ(LLM_ERR_CONTEXT_OVERFLOW, 10);
  EXPECT_EQ(LLM_ERR_INVALID_UTF8, 11);
  EXPECT_EQ(LLM_ERR_BUFFER_TOO_SMALL, 12);
  EXPECT_EQ(LLM_ERR_BACKEND, 13);
  EXPECT_EQ(LLM_ERR_SHUTDOWN, 14);
  EXPECT_EQ(LLM_ERR_INTERNAL, 15);
  EXPECT_EQ(LLM_ERR_KV_MISMATCH, 16);
  EXPECT_EQ(LLM_ERR_KV_CORRUPT, 17);
}

// The KV state functions' signatures (issue 30): a change fails to compile.
TEST(Abi, KvStateSignatures) {
  static_assert(std::is_same_v<llm_kv_write_fn, int32_t (*)(void*, const void*, size_t)>);
  static_assert(std::is_same_v<llm_kv_read_fn, int32_t (*)(void*, void*, size_t, size_t*)>);
  static_assert(std::is_same_v<decltype(&llm_kv_export),
                               llm_status (*)(llm_ctx*, const llm_token*, int32_t, uint64_t, llm_kv_write_fn, void*,
                                              int32_t*)>);
  static_assert(std::is_same_v<decltype(&llm_kv_import),
                               llm_status (*)(llm_ctx*, uint64_t, llm_kv_read_fn, void*, int32_t*)>);
  static_assert(std::is_same_v<decltype(&llm_kv_export_file),
                               llm_status (*)(llm_ctx*, const llm_token*, int32_t, uint64_t, const char*, int32_t*)>);
  static_assert(std::is_same_v<decltype(&llm_kv_import_file),
                               llm_status (*)(llm_ctx*, uint64_t, const char*, int32_t*)>);
  EXPECT_STREQ(llm_status_str(LLM_ERR_KV_MISMATCH), "LLM_ERR_KV_MISMATCH");
  EXPECT_STREQ(llm_status_str(LLM_ERR_KV_CORRUPT), "LLM_ERR_KV_CORRUPT");
}

// Reasoning output (issue 32): the values of the format and part enums.
TEST(Abi, Reasoning) {
  EXPECT_EQ(LLM_REASONING_NONE, 0);
  EXPECT_EQ(LLM_REASONING_DEEPSEEK, 1);
  EXPECT_EQ(LLM_REASONING_HARMONY, 2);
  EXPECT_EQ(LLM_REASONING_AUTO, 3);
  EXPECT_EQ(LLM_PART_CONTENT, 0);
  EXPECT_EQ(LLM_PART_REASONING, 1);
  llm_request r;
  ASSERT_EQ(llm_request_init(&r), LLM_OK);
  EXPECT_EQ(r.reasoning_format, LLM_REASONING_NONE);
  EXPECT_EQ(r.reserved5, 0);
}

// Embeddings (issue 31): values, the blocking call's signature and params.
TEST(Abi, Embeddings) {
  EXPECT_EQ(LLM_TASK_GENERATE, 0);
  EXPECT_EQ(LLM_TASK_EMBED, 1);
  EXPECT_EQ(LLM_POOLING_MODEL, -1);
  EXPECT_EQ(LLM_POOLING_NONE, 0);
  EXPECT_EQ(LLM_POOLING_MEAN, 1);
  EXPECT_EQ(LLM_POOLING_CLS, 2);
  EXPECT_EQ(LLM_POOLING_LAST, 3);
  EXPECT_EQ(LLM_POOLING_RANK, 4);
  static_assert(std::is_same_v<decltype(&llm_embed),
                               llm_status (*)(llm_ctx*, const char* const*, const llm_token* const*, const int32_t*,
                                              int32_t, const llm_embed_params*, float*, size_t, int32_t*)>);
  EXPECT_EQ(sizeof(llm_embed_params), 32u);
  EXPECT_EQ(offsetof(llm_embed_params, struct_size), 0u);
  EXPECT_EQ(offsetof(llm_embed_params, pooling), 4u);
  EXPECT_EQ(offsetof(llm_embed_params, normalize), 8u);
  EXPECT_EQ(offsetof(llm_embed_params, dimensions), 12u);
  EXPECT_EQ(offsetof(llm_embed_params, truncate), 16u);
  EXPECT_EQ(offsetof(llm_embed_params, tokenize_flags), 20u);
  EXPECT_EQ(offsetof(llm_embed_params, priority), 24u);
  EXPECT_EQ(offsetof(llm_embed_params, reserved0), 28u);
  static_assert(std::is_same_v<decltype(&llm_rerank_tokenize),
                               llm_status (*)(llm_ctx*, const char*, const char*, llm_token*, int32_t, int32_t*)>);
}

TEST(Abi, EnumValues) {
  EXPECT_EQ(LLM_BACKEND_AUTO, 0);
  EXPECT_EQ(LLM_BACKEND_CPU, 1);
  EXPECT_EQ(LLM_BACKEND_CUDA, 2);
  EXPECT_EQ(LLM_EVENT_TOKEN, 1);
  EXPECT_EQ(LLM_EVENT_FINAL, 2);
  EXPECT_EQ(LLM_FINISH_NONE, 0);
  EXPECT_EQ(LLM_FINISH_STOP, 1);
  EXPECT_EQ(LLM_FINISH_LENGTH, 2);
  EXPECT_EQ(LLM_FINISH_CANCELLED, 3);
  EXPECT_EQ(LLM_FINISH_ERROR, 4);
  EXPECT_EQ(LLM_TOKENIZE_ADD_SPECIAL, 1u);
  EXPECT_EQ(LLM_TOKENIZE_PARSE_SPECIAL, 2u);
  EXPECT_EQ(LLM_DETOKENIZE_RENDER_SPECIAL, 1u);
  EXPECT_EQ(LLM_DETOKENIZE_STRIP_LEADING_SPACE, 2u);
  EXPECT_EQ(LLM_SEED_RANDOM, UINT64_MAX);
  EXPECT_EQ(LLM_SPEC_AUTO, 0);
  EXPECT_EQ(LLM_SPEC_OFF, 1);
  EXPECT_EQ(LLM_SPEC_NGRAM, 2);
  EXPECT_EQ(LLM_SPEC_DRAFT, 3);
  EXPECT_EQ(LLM_WHITESPACE_BOUNDED, 0);
  EXPECT_EQ(LLM_WHITESPACE_FREE, 1);
  EXPECT_EQ(LLM_PREEMPT_RECOMPUTE, 0);
  EXPECT_EQ(LLM_PREEMPT_SWAP, 1);
  EXPECT_EQ(LLM_KV_AUTO, 0);
  EXPECT_EQ(LLM_KV_F32, 1);
  EXPECT_EQ(LLM_KV_F16, 2);
  EXPECT_EQ(LLM_KV_Q8_0, 3);
  EXPECT_EQ(LLM_KV_Q4_0, 4);
  EXPECT_EQ(LLM_KV_FP8_E4M3, 5);
}

TEST(Abi, KvRoleValues) {
  EXPECT_EQ(LLM_KV_ROLE_NONE, 0);
  EXPECT_EQ(LLM_KV_ROLE_PRODUCER, 1);
  EXPECT_EQ(LLM_KV_ROLE_CONSUMER, 2);
  EXPECT_EQ(LLM_KV_ROLE_BOTH, 3);
}

TEST(Abi, ToolFormatValues) {
  EXPECT_EQ(LLM_TOOL_FORMAT_AUTO, 0);
  EXPECT_EQ(LLM_TOOL_FORMAT_GENERIC, 1);
  EXPECT_EQ(LLM_TOOL_FORMAT_HERMES, 2);
  EXPECT_EQ(LLM_TOOL_FORMAT_LLAMA3, 3);
  EXPECT_EQ(LLM_TOOL_FORMAT_MISTRAL, 4);
}

#ifdef LLM_ABI_64
#define PIN(T, f, off) EXPECT_EQ(offsetof(T, f), static_cast<size_t>(off)) << #T "." #f

// appended in 0.6 (issue 35): llm_get_device_stats
TEST(Abi, DeviceStatsLayout) {
  EXPECT_EQ(sizeof(llm_device_stats), 56u);
  PIN(llm_device_stats, device, 4);
  PIN(llm_device_stats, first_layer, 8);
  PIN(llm_device_stats, end_layer, 12);
  PIN(llm_device_stats, n_devices, 16);
  PIN(llm_device_stats, reserved, 20);
  PIN(llm_device_stats, weight_bytes, 24);
  PIN(llm_device_stats, kv_pool_bytes, 32);
  PIN(llm_device_stats, used_bytes, 40);
  PIN(llm_device_stats, total_bytes, 48);
}

TEST(Abi, CtxParamsLayout) {
  EXPECT_EQ(sizeof(llm_ctx_params), 248u);
  // appended in 0.7 (issue 36: images), reserved6 in the 0.6 layout's tail padding
  PIN(llm_ctx_params, reserved6, 236);
  PIN(llm_ctx_params, mmproj_path, 240);
  // appended in 0.6 (issue 35: several GPUs), after the host experts
  EXPECT_EQ(LLM_MAX_DEVICES, 16);
  // appended in 0.6 (issue 35: n_gpu_layers fitted to free memory)
  EXPECT_EQ(LLM_GPU_LAYERS_ALL, -1);
  EXPECT_EQ(LLM_GPU_LAYERS_AUTO, -2);
  PIN(llm_ctx_params, main_gpu, 168);
  PIN(llm_ctx_params, tensor_split, 172);
  PIN(llm_ctx_params, moe_prefetch, 160);
  PIN(llm_ctx_params, reserved5, 164);
  // appended in 0.6 (issue 35: experts in host memory)
  PIN(llm_ctx_params, n_cpu_moe, 144);
  PIN(llm_ctx_params, moe_host_policy, 148);
  PIN(llm_ctx_params, moe_cache_bytes, 152);
  // appended in 0.5 (issue 33: prefill/decode disaggregation)
  PIN(llm_ctx_params, kv_role, 128);
  PIN(llm_ctx_params, kv_lease_ms, 132);
  PIN(llm_ctx_params, kv_listen_addr, 136);
  // appended in 0.4 (issue 30: KV tiers)
  PIN(llm_ctx_params, kv_host_bytes, 104);
  PIN(llm_ctx_params, kv_disk_dir, 112);
  PIN(llm_ctx_params, kv_disk_bytes, 120);
  PIN(llm_ctx_params, kv_type, 88);
  PIN(llm_ctx_params, kv_type_v, 92);  // 0.6 (issue 32): the 0.3 layout's reserved3
  PIN(llm_ctx_params, n_gpu_layers, 96);
  PIN(llm_ctx_params, reserved4, 100);
  PIN(llm_ctx_params, swap_space_bytes, 80);
  PIN(llm_ctx_params, gpu_memory_fraction, 72);
  PIN(llm_ctx_params, reserved2, 76);
  PIN(llm_ctx_params, draft_model_path, 48);
  PIN(llm_ctx_params, self_draft_layers, 56);
  PIN(llm_ctx_params, spec_mode, 60);
  PIN(llm_ctx_params, spec_k, 64);
  PIN(llm_ctx_params, reserved1, 68);
  PIN(llm_ctx_params, struct_size, 0);
  PIN(llm_ctx_params, backend, 4);
  PIN(llm_ctx_params, model_path, 8);
  PIN(llm_ctx_params, n_threads, 16);
  PIN(llm_ctx_params, n_ctx, 20);
  PIN(llm_ctx_params, kv_block_size, 24);
  PIN(llm_ctx_params, n_kv_blocks, 28);
  PIN(llm_ctx_params, max_seqs, 32);
  PIN(llm_ctx_params, max_batch_tokens, 36);
  PIN(llm_ctx_params, max_queued, 40);
  PIN(llm_ctx_params, preempt_mode, 44);  // was reserved0 (must be 0 = RECOMPUTE)
}

TEST(Abi, SamplingParamsLayout) {
  EXPECT_EQ(sizeof(llm_sampling_params), 64u);
  // appended in 0.2 (issue 20)
  PIN(llm_sampling_params, logit_bias, 48);
  PIN(llm_sampling_params, n_logit_bias, 56);
  PIN(llm_sampling_params, reserved1, 60);
  EXPECT_EQ(sizeof(llm_logit_bias), 8u);
  PIN(llm_logit_bias, token, 0);
  PIN(llm_logit_bias, bias, 4);
  PIN(llm_sampling_params, struct_size, 0);
  PIN(llm_sampling_params, temperature, 4);
  PIN(llm_sampling_params, top_k, 8);
  PIN(llm_sampling_params, top_p, 12);
  PIN(llm_sampling_params, min_p, 16);
  PIN(llm_sampling_params, repetition_penalty, 20);
  PIN(llm_sampling_params, frequency_penalty, 24);
  PIN(llm_sampling_params, presence_penalty, 28);
  PIN(llm_sampling_params, penalty_last_n, 32);
  PIN(llm_sampling_params, seed, 40);
}

TEST(Abi, RequestLayout) {
  EXPECT_EQ(sizeof(llm_request), 224u);
  // appended in 0.7 (issue 36: images in the prompt)
  PIN(llm_request, parts, 208);
  PIN(llm_request, n_parts, 216);
  PIN(llm_request, reserved6, 220);
  // appended in 0.6 (issue 32: reasoning output)
  PIN(llm_request, reasoning_format, 200);
  PIN(llm_request, reserved5, 204);
  // appended in 0.5 (issue 33: prefill/decode disaggregation)
  PIN(llm_request, kv_transfer_desc, 184);
  PIN(llm_request, kv_produce, 192);
  PIN(llm_request, reserved4, 196);
  // appended in 0.4 (issue 31: embeddings)
  PIN(llm_request, task, 152);
  PIN(llm_request, pooling, 156);
  PIN(llm_request, normalize, 160);
  PIN(llm_request, dimensions, 164);
  PIN(llm_request, truncate, 168);
  PIN(llm_request, reserved2, 172);
  // appended in 0.4 (issue 30: KV kept)
  PIN(llm_request, keep_kv, 176);
  PIN(llm_request, constraint_whitespace, 180);
  // appended in 0.3 (issue 20: constrained decoding)
  PIN(llm_request, constraint_kind, 128);
  PIN(llm_request, n_choices, 132);
  PIN(llm_request, constraint, 136);
  PIN(llm_request, choices, 144);
  // appended in 0.2 (issue 20)
  PIN(llm_request, stop_token_ids, 104);
  PIN(llm_request, n_stop_token_ids, 112);
  PIN(llm_request, min_tokens, 116);
  PIN(llm_request, top_logprobs, 120);
  PIN(llm_request, reserved1, 124);
  PIN(llm_request, spec_mode, 96);
  PIN(llm_request, spec_k, 100);
  PIN(llm_request, struct_size, 0);
  PIN(llm_request, tokenize_flags, 4);
  PIN(llm_request, prompt, 8);
  PIN(llm_request, prompt_tokens, 16);
  PIN(llm_request, n_prompt_tokens, 24);
  PIN(llm_request, max_tokens, 28);
  PIN(llm_request, sampling, 32);
  PIN(llm_request, stop, 40);
  PIN(llm_request, n_stop, 48);
  PIN(llm_request, ignore_eos, 52);
  PIN(llm_request, n, 56);
  PIN(llm_request, priority, 60);
  PIN(llm_request, prompt_logprobs, 64);
  PIN(llm_request, reserved0, 68);
  PIN(llm_request, callback, 72);
  PIN(llm_request, user_data, 80);
  PIN(llm_request, cache_salt, 88);
}

TEST(Abi, EventAndMetricsLayout) {
  EXPECT_EQ(sizeof(llm_metrics), 56u);
  PIN(llm_metrics, prompt_tokens, 0);
  PIN(llm_metrics, cached_prompt_tokens, 4);
  PIN(llm_metrics, generated_tokens, 8);
  PIN(llm_metrics, draft_tokens_proposed, 12);
  PIN(llm_metrics, draft_tokens_accepted, 16);
  PIN(llm_metrics, preemptions, 20);
  PIN(llm_metrics, queue_ms, 24);
  PIN(llm_metrics, ttft_ms, 32);
  PIN(llm_metrics, tpot_ms, 40);
  PIN(llm_metrics, total_ms, 48);
  EXPECT_EQ(sizeof(llm_event), 192u);
  // appended in 0.6 (issue 32: reasoning output)
  PIN(llm_event, reasoning_text, 176);
  PIN(llm_event, reasoning_text_len, 184);
  PIN(llm_event, part, 188);
  // appended in 0.5 (issue 33: prefill/decode disaggregation)
  PIN(llm_event, kv_transfer_desc, 160);
  PIN(llm_event, transferred_prompt_tokens, 168);
  PIN(llm_event, kv_transfer_status, 172);
  // appended in 0.4 (issue 31: embeddings)
  PIN(llm_event, embedding, 144);
  PIN(llm_event, n_embedding, 152);
  PIN(llm_event, n_embedding_rows, 156);
  // appended in 0.2 (issue 20)
  PIN(llm_event, top_logprobs, 128);
  PIN(llm_event, n_top_logprobs, 136);
  PIN(llm_event, reserved1, 140);
  EXPECT_EQ(sizeof(llm_top_logprob), 8u);
  PIN(llm_top_logprob, token, 0);
  PIN(llm_top_logprob, logprob, 4);
  PIN(llm_event, struct_size, 0);
  PIN(llm_event, type, 4);
  PIN(llm_event, request_id, 8);
  PIN(llm_event, seq_index, 16);
  PIN(llm_event, token, 20);
  PIN(llm_event, text, 24);
  PIN(llm_event, text_len, 32);
  PIN(llm_event, logprob, 36);
  PIN(llm_event, finish_reason, 40);
  PIN(llm_event, status, 44);
  PIN(llm_event, message, 48);
  PIN(llm_event, metrics, 56);
  PIN(llm_event, prompt_logprobs, 112);
  PIN(llm_event, n_prompt_logprobs, 120);
  PIN(llm_event, reserved0, 124);
}

TEST(Abi, StatsAndModelInfoLayout) {
  EXPECT_EQ(sizeof(llm_stats), 520u);
  // appended in 0.7 (issue 36: images in the prompt)
  PIN(llm_stats, images_encoded, 488);
  PIN(llm_stats, image_cache_hits, 496);
  PIN(llm_stats, image_tokens, 504);
  PIN(llm_stats, image_encode_seconds, 512);
  PIN(llm_stats, moe_prefetch_experts, 456);
  PIN(llm_stats, moe_prefetch_used, 464);
  PIN(llm_stats, moe_predicted_wanted, 472);
  PIN(llm_stats, moe_predicted_right, 480);
  // appended in 0.6 (issue 35: experts in host memory)
  PIN(llm_stats, moe_host_layers, 384);
  PIN(llm_stats, moe_cache_slots, 388);
  PIN(llm_stats, moe_cache_bytes, 392);
  PIN(llm_stats, moe_host_bytes, 400);
  PIN(llm_stats, moe_cpu_steps, 408);
  PIN(llm_stats, moe_copy_steps, 416);
  PIN(llm_stats, moe_bytes_copied, 424);
  PIN(llm_stats, moe_cache_hits, 432);
  PIN(llm_stats, moe_cache_misses, 440);
  PIN(llm_stats, moe_tokens, 448);
  // appended in 0.5 (issue 33: prefill/decode disaggregation)
  PIN(llm_stats, kv_xfer_pulls, 304);
  PIN(llm_stats, kv_xfer_fallbacks, 312);
  PIN(llm_stats, kv_xfer_bytes, 320);
  PIN(llm_stats, kv_xfer_tokens, 328);
  PIN(llm_stats, kv_xfer_seconds, 336);
  PIN(llm_stats, kv_xfer_served, 344);
  PIN(llm_stats, kv_xfer_bytes_served, 352);
  PIN(llm_stats, kv_leases_expired, 360);
  PIN(llm_stats, kv_lease_bytes, 368);
  PIN(llm_stats, kv_leases_active, 376);
  PIN(llm_stats, kv_role, 380);
  // appended in 0.4 (issue 30: KV tiers)
  PIN(llm_stats, kv_tier_host_hit_tokens, 232);
  PIN(llm_stats, kv_tier_disk_hit_tokens, 240);
  PIN(llm_stats, kv_tier_bytes_down, 248);
  PIN(llm_stats, kv_tier_bytes_up, 256);
  PIN(llm_stats, kv_tier_host_bytes, 264);
  PIN(llm_stats, kv_tier_disk_bytes, 272);
  PIN(llm_stats, kv_tier_files_refused, 280);
  PIN(llm_stats, kv_imports_refused, 288);
  PIN(llm_stats, kv_tier_disk_on, 296);
  PIN(llm_stats, reserved2, 300);
  PIN(llm_stats, kv_bytes, 200);
  PIN(llm_stats, kv_pool_bytes, 208);
  PIN(llm_stats, weight_bytes, 216);
  PIN(llm_stats, scratch_bytes, 224);
  PIN(llm_stats, swap_outs, 160);
  PIN(llm_stats, swap_ins, 168);
  PIN(llm_stats, swap_blocks_out, 176);
  PIN(llm_stats, swap_blocks_in, 184);
  PIN(llm_stats, swap_blocks_total, 192);
  PIN(llm_stats, swap_blocks_used, 196);
  PIN(llm_stats, draft_tokens_proposed, 136);
  PIN(llm_stats, draft_tokens_accepted, 144);
  PIN(llm_stats, spec_rounds, 152);
  PIN(llm_stats, struct_size, 0);
  PIN(llm_stats, backend, 4);
  PIN(llm_stats, requests_submitted, 8);
  PIN(llm_stats, requests_finished, 16);
  PIN(llm_stats, prompt_tokens, 24);
  PIN(llm_stats, generated_tokens, 32);
  PIN(llm_stats, steps, 40);
  PIN(llm_stats, queue_depth, 48);
  PIN(llm_stats, running, 52);
  PIN(llm_stats, kv_blocks_total, 56);
  PIN(llm_stats, kv_blocks_used, 60);
  PIN(llm_stats, kv_blocks_free, 64);
  PIN(llm_stats, kv_blocks_cached, 68);
  PIN(llm_stats, uptime_s, 72);
  PIN(llm_stats, prompt_tokens_per_s, 80);
  PIN(llm_stats, generated_tokens_per_s, 88);
  PIN(llm_stats, prefix_cache_queried_tokens, 96);
  PIN(llm_stats, prefix_cache_hit_tokens, 104);
  PIN(llm_stats, preemptions, 112);
  PIN(llm_stats, waiting, 120);
  PIN(llm_stats, reserved1, 124);
  PIN(llm_stats, kv_utilization, 128);
  EXPECT_EQ(sizeof(llm_model_info), 64u);
  PIN(llm_model_info, struct_size, 0);
  PIN(llm_model_info, n_vocab, 4);
  PIN(llm_model_info, n_ctx_train, 8);
  PIN(llm_model_info, n_ctx, 12);
  PIN(llm_model_info, n_embd, 16);
  PIN(llm_model_info, n_layer, 20);
  PIN(llm_model_info, n_head, 24);
  PIN(llm_model_info, n_head_kv, 28);
  PIN(llm_model_info, bos, 32);
  PIN(llm_model_info, eos, 36);
  PIN(llm_model_info, n_params, 40);
  PIN(llm_model_info, arch, 48);
  PIN(llm_model_info, name, 56);
}
#endif

TEST(Abi, VersionMatchesHeader) {
  EXPECT_EQ(llm_version_number(), static_cast<uint32_t>(LLM_VERSION_NUMBER));
  EXPECT_STREQ(llm_version(), "0.1.0");
}

// Images in the prompt (issue 36): content parts, chat messages v2, values
// and the template call's signature.
TEST(Abi, ContentParts) {
  EXPECT_EQ(LLM_CONTENT_TEXT, 0);
  EXPECT_EQ(LLM_CONTENT_IMAGE, 1);
  EXPECT_EQ(LLM_CONTENT_IMAGE_RGB, 2);
  EXPECT_EQ(sizeof(llm_content_part), 40u);
  PIN(llm_content_part, struct_size, 0);
  PIN(llm_content_part, kind, 4);
  PIN(llm_content_part, text, 8);
  PIN(llm_content_part, data, 16);
  PIN(llm_content_part, n_data, 24);
  PIN(llm_content_part, width, 32);
  PIN(llm_content_part, height, 36);
  EXPECT_EQ(sizeof(llm_chat_message_v2), 24u);
  PIN(llm_chat_message_v2, struct_size, 0);
  PIN(llm_chat_message_v2, n_parts, 4);
  PIN(llm_chat_message_v2, role, 8);
  PIN(llm_chat_message_v2, parts, 16);
  static_assert(std::is_same_v<decltype(&llm_content_part_init), llm_status (*)(llm_content_part*)>);
  static_assert(std::is_same_v<decltype(&llm_chat_apply_template_v2),
                               llm_status (*)(llm_ctx*, const char*, const llm_chat_message_v2*, size_t, int32_t,
                                              char*, size_t, size_t*)>);
  llm_content_part part;
  std::memset(&part, 0x5a, sizeof(part));
  ASSERT_EQ(llm_content_part_init(&part), LLM_OK);
  EXPECT_EQ(part.struct_size, sizeof(llm_content_part));
  EXPECT_EQ(part.kind, LLM_CONTENT_TEXT);
  EXPECT_EQ(part.text, nullptr);
  EXPECT_EQ(part.data, nullptr);
  EXPECT_EQ(part.n_data, 0u);
  EXPECT_EQ(part.width, 0);
  EXPECT_EQ(part.height, 0);
  EXPECT_EQ(llm_content_part_init(nullptr), LLM_ERR_NULL_ARGUMENT);
  llm_request r;
  ASSERT_EQ(llm_request_init(&r), LLM_OK);
  EXPECT_EQ(r.parts, nullptr);
  EXPECT_EQ(r.n_parts, 0);
  llm_ctx_params p;
  ASSERT_EQ(llm_ctx_params_init(&p), LLM_OK);
  EXPECT_EQ(p.mmproj_path, nullptr);
  EXPECT_EQ(p.reserved6, 0);
}
