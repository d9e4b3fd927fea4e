// The defaults of llm_ctx_params and llm_request: the one table behind the
// values include/llm.h documents ("0 = 16", "0 = 512", ...). Every layer that
// has such a default (EngineConfig, SchedulerConfig, the CUDA backend's
// options, llm_request_init, the context builder) takes it from here; llm.h's
// comments are the specification, so a change here is a change there.
#pragma once

#include <cstddef>
#include <cstdint>

namespace llm::defaults {

// ---- llm_ctx_params: what a zero field means
inline constexpr int32_t kKvBlockSize = 16;          // kv_block_size: tokens per KV block
inline constexpr int32_t kMaxSeqs = 16;              // max_seqs: sequences per engine step
inline constexpr int32_t kMaxBatchTokens = 512;      // max_batch_tokens: tokens per engine step
inline constexpr int32_t kMaxQueued = 1024;          // max_queued: pending requests before BUSY
inline constexpr int32_t kSpecK = 4;                 // spec_k: drafts per speculation round
inline constexpr float kGpuMemoryFraction = 0.90f;   // gpu_memory_fraction (CUDA)
// CUDA: device memory each backend leaves free beyond what it allocates up to
// its KV pool (its share of gpu_memory_fraction less this): logits buffers and
// graph metadata that grow later, cuBLAS's and the driver's own allocations,
// allocator rounding on a GPU. The KV pool's sizing and n_gpu_layers =
// LLM_GPU_LAYERS_AUTO's fit (engine/auto_fit.h) both keep it.
inline constexpr int64_t kCudaHeadroomBytes = int64_t{256} << 20;
// n_kv_blocks on the CPU: enough for max_seqs full-length sequences, held to
// this much KV memory (but at least one full-length sequence), because the
// CPU pool is committed at creation (SmolLM2's 8K context x 16 sequences
// would otherwise ask for 6 GiB).
inline constexpr int64_t kCpuKvBytes = int64_t{256} << 20;
// swap_space_bytes with preempt_mode SWAP: the KV pool's size, at most this.
inline constexpr uint64_t kMaxSwapBytes = uint64_t{1} << 30;
// kv_disk_bytes with a kv_disk_dir: the disk tier's budget.
inline constexpr uint64_t kKvDiskBytes = uint64_t{4} << 30;
// Prefill/decode disaggregation (llm_ctx_params.kv_*, src/disagg/).
inline constexpr int32_t kKvLeaseMs = 30000;              // kv_lease_ms 0
inline constexpr const char* kKvListenAddr = "127.0.0.1:0";  // kv_listen_addr NULL
inline constexpr int32_t kKvPullStepTimeoutMs = 5000;     // each message and run of a pull
inline constexpr uint64_t kKvPullChunkBytes = uint64_t{8} << 20;  // bytes per PULL (one transfer)

// ---- llm_ctx_params: ranges
inline constexpr int32_t kMaxThreads = 1024;
inline constexpr int32_t kMaxCtx = 1 << 22;
inline constexpr int32_t kMaxKvBlockSize = 1024;
inline constexpr int32_t kMaxMaxSeqs = 4096;
inline constexpr int32_t kMaxMaxBatchTokens = 1 << 20;
inline constexpr int64_t kMaxKvBlocks = int64_t{1} << 24;  // also the swap space's limit, in blocks
inline constexpr int32_t kMaxSpecK = 32;

// ---- images in the prompt (engine/image_cache.h)
// Encoded images (soft-token rows) the engine keeps by content hash, so the
// same image in several requests is encoded once: 8 of Gemma 3 4B's
// (256 x 2560 floats) are 20 MiB.
inline constexpr int32_t kImageCacheEntries = 8;

// ---- llm_request
inline constexpr int32_t kMaxTokens = 256;           // llm_request_init's max_tokens
inline constexpr int32_t kMaxParallel = 64;          // n in [1, 64]
inline constexpr int32_t kMaxStops = 64;             // n_stop in [0, 64]
inline constexpr size_t kMaxStopBytes = 4096;        // each stop string, in bytes

// ---- images in requests (llm_content_part, src/vision/image_decode.h)
// Pixels one decoded picture may have (its side is held to kMaxImageSide,
// src/vision/image.h): a 48-megapixel phone photo fits; a header declaring
// more is refused before anything is allocated for it (decompression
// bombs). 2^26 pixels are 192 MiB of RGB.
inline constexpr int64_t kMaxImagePixels = int64_t{1} << 26;
// Encoded bytes one image part may carry (a PNG of the largest picture
// above compresses far below this).
inline constexpr size_t kMaxImageBytes = size_t{64} << 20;
// Progressive JPEG scans one picture may have: each scan re-reads the whole
// coefficient buffer, so thousands of tiny scans cost minutes of CPU.
inline constexpr int32_t kMaxJpegScans = 500;
// Image parts in one request.
inline constexpr int32_t kMaxImagesPerRequest = 64;

// ---- llm-server: remote image URLs (--allow-remote-images, samples/server/image_fetch.h)
// A fetched picture's bytes (--remote-image-max-bytes): OpenAI's own limit
// for an image input; at most kMaxImageBytes.
inline constexpr size_t kRemoteImageMaxBytes = size_t{20} << 20;
// One fetch, connection, redirects and body together (--remote-image-timeout).
inline constexpr double kRemoteImageTimeoutS = 5.0;
// Redirects followed per fetch; each hop is checked as the first URL was.
inline constexpr int32_t kRemoteImageMaxRedirects = 3;

}  // namespace llm::defaults
