/*
 * llm.h — the public API of llmrt, an embeddable LLM inference runtime.
 *
 * This header is the whole contract. It is plain C (C99), self-contained, and
 * names no C++, CUDA or third-party type.
 *
 * ============================================================================
 * CONVENTIONS
 * ============================================================================
 *  1. Every fallible function returns an llm_status. LLM_OK is 0; the other
 *     values are pinned forever and only ever appended. On failure the calling
 *     thread's llm_last_error() holds a human-readable message. Out-parameters
 *     are left untouched on failure unless the function says otherwise.
 *  2. Parameter structs are passed by pointer and begin with
 *     `uint32_t struct_size`. Fill them with the matching llm_*_init()
 *     function, then change the fields you need. Fields are only ever
 *     appended: the library accepts a struct from an older header (a smaller
 *     struct_size) and uses defaults for the fields it lacks. A struct_size
 *     smaller than the first published version, or larger than this library
 *     knows, is rejected with LLM_ERR_STRUCT_SIZE.
 *  3. Only fixed-width integers, float, double, pointers and these structs
 *     cross the ABI. Enumerations are named constants; fields that hold them
 *     are int32_t.
 *  4. Handles are opaque (llm_ctx). Destroy functions accept NULL as a no-op.
 *  5. Strings are UTF-8. Input strings are NUL-terminated unless a length is
 *     passed beside them. Strings the library returns are owned by the library
 *     and stay valid for the documented time only.
 *  6. No exception, abort or signal ever leaves the library because of bad
 *     input: every failure is a status code and a message.
 *
 * ============================================================================
 * THREADING
 * ============================================================================
 *  Each llm_ctx runs one engine thread of its own (plus `n_threads` compute
 *  workers). llm_submit, llm_cancel, llm_poll, llm_wakeup, llm_get_stats,
 *  llm_tokenize, llm_detokenize, llm_model_get_info and the llm_kv_*
 *  functions (which take turns) are thread-safe on one context. Token callbacks run inside llm_poll, on the thread that calls
 *  llm_poll, never on the engine thread. llm_ctx_destroy must not race any
 *  other call on the same context. llm_last_error() is thread-local.
 *  A context belongs to no thread: it may be created, used, polled and
 *  destroyed on different threads, and threads that used it may exit at any
 *  time (requests they submitted go on; only their llm_last_error() message
 *  is lost).
 *
 * ============================================================================
 * LIFECYCLE OF A CONTEXT
 * ============================================================================
 *  1. llm_ctx_params_init(&p); set p.model_path (and other fields).
 *  2. llm_ctx_create(&p, &ctx): loads the model, reserves the KV-cache pool,
 *     starts the engine thread.
 *  3. llm_request_init(&r); set r.prompt, r.max_tokens, r.sampling, ...;
 *     llm_submit(ctx, &r, &id) queues it and returns at once.
 *  4. llm_poll(ctx, events, cap, &n, timeout_ms) drains events (token pieces
 *     and one final event per sequence) and runs registered token callbacks.
 *  5. llm_cancel(ctx, id) stops a request at the next step boundary.
 *  6. llm_ctx_destroy(ctx) cancels what is in flight, stops the engine thread
 *     and frees everything.
 *
 * ============================================================================
 * ABI POLICY
 * ============================================================================
 *  Within one major version (LLM_VERSION_MAJOR, the shared library's
 *  SOVERSION) no function is removed or changes signature, no struct field
 *  moves, no constant changes value. New behaviour comes as new functions,
 *  new constants or fields appended to the end of structs. A test pins the
 *  layout of every struct and the value of every constant.
 */
#ifndef LLM_H
#define LLM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- export */
#if defined(LLM_STATIC_DEFINE)
#define LLM_API
#elif defined(_WIN32)
#if defined(LLM_BUILDING_LIBRARY)
#define LLM_API __declspec(dllexport)
#else
#define LLM_API __declspec(dllimport)
#endif
#else
#define LLM_API __attribute__((visibility("default")))
#endif

/* --------------------------------------------------------------- version */
#define LLM_VERSION_MAJOR 0
#define LLM_VERSION_MINOR 1
#define LLM_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH */
/* The most CUDA devices one context splits its layers over
   (llm_ctx_params.tensor_split). */
#define LLM_MAX_DEVICES 16

#define LLM_VERSION_NUMBER (LLM_VERSION_MAJOR * 10000 + LLM_VERSION_MINOR * 100 + LLM_VERSION_PATCH)

/* The version of the library actually loaded, as "MAJOR.MINOR.PATCH". Static
 * string; never NULL. */
LLM_API const char* llm_version(void);
/* The same as a number, comparable with LLM_VERSION_NUMBER. */
LLM_API uint32_t llm_version_number(void);

/* ------------------------------------------------------------ basic types */
typedef struct llm_ctx llm_ctx;  /* opaque */
typedef int32_t llm_status;      /* LLM_OK or LLM_ERR_* */
typedef int32_t llm_token;       /* a token id */
typedef uint64_t llm_request_id; /* 0 is never a valid id */

/* ---------------------------------------------------------- status codes */
enum {
  LLM_OK = 0,
  LLM_ERR_INVALID_ARGUMENT = 1, /* a value out of range or inconsistent     */
  LLM_ERR_NULL_ARGUMENT = 2,    /* a required pointer was NULL               */
  LLM_ERR_STRUCT_SIZE = 3,      /* struct_size too small or unknown          */
  LLM_ERR_IO = 4,               /* a file could not be opened or read        */
  LLM_ERR_MODEL_FORMAT = 5,     /* a model file is corrupt or malformed      */
  LLM_ERR_UNSUPPORTED = 6,      /* valid, but not supported by this build    */
  LLM_ERR_OUT_OF_MEMORY = 7,    /* host or device memory exhausted           */
  LLM_ERR_BUSY = 8,             /* the request queue is full; retry later    */
  LLM_ERR_NOT_FOUND = 9,        /* unknown (or already finished) request id  */
  LLM_ERR_CONTEXT_OVERFLOW = 10,/* prompt or request larger than the context */
  LLM_ERR_INVALID_UTF8 = 11,    /* input text is not valid UTF-8             */
  LLM_ERR_BUFFER_TOO_SMALL = 12,/* output buffer too small; size reported    */
  LLM_ERR_BACKEND = 13,         /* the compute backend failed                */
  LLM_ERR_SHUTDOWN = 14,        /* the context is shutting down              */
  LLM_ERR_INTERNAL = 15,        /* a bug: please report it                   */
  LLM_ERR_KV_MISMATCH = 16,     /* a KV stream from another model, another   */
                                /* KV geometry or a newer format version     */
  LLM_ERR_KV_CORRUPT = 17       /* a KV stream truncated, malformed or with a */
                                /* bad checksum                              */
};

/* A static, never-NULL name for a status code ("LLM_ERR_BUSY"); unknown
 * codes give "LLM_ERR_UNKNOWN". */
LLM_API const char* llm_status_str(llm_status status);

/* The message of the last failure on the calling thread ("" if none). The
 * pointer stays valid until the next llm_* call on this thread. Never NULL.
 * Each thread has its own message: a failure on one thread is never seen on
 * another, a new thread starts with "", and the message of a thread ends with
 * it. Calls that succeed may clear it. */
LLM_API const char* llm_last_error(void);

/* ------------------------------------------------------------- constants */
enum { /* llm_ctx_params.backend */
  LLM_BACKEND_AUTO = 0, /* CUDA when built with it and a GPU is present, else CPU */
  LLM_BACKEND_CPU = 1,
  LLM_BACKEND_CUDA = 2
};

enum { /* llm_event.type */
  LLM_EVENT_TOKEN = 1, /* one generated token (and the text it completes)     */
  LLM_EVENT_FINAL = 2  /* the last event of a sequence: finish reason, metrics */
};

enum { /* llm_event.finish_reason */
  LLM_FINISH_NONE = 0,      /* not finished (token events)                    */
  LLM_FINISH_STOP = 1,      /* EOS / end-of-generation token or a stop string */
  LLM_FINISH_LENGTH = 2,    /* max_tokens reached, or the context is full     */
  LLM_FINISH_CANCELLED = 3, /* llm_cancel() or context destruction            */
  LLM_FINISH_ERROR = 4      /* see llm_event.status and llm_event.message     */
};

enum { /* flags of llm_tokenize and llm_request.tokenize_flags */
  LLM_TOKENIZE_ADD_SPECIAL = 1u,  /* add BOS (and EOS) as the model's metadata says */
  LLM_TOKENIZE_PARSE_SPECIAL = 2u /* text like "<s>" becomes the special token  */
};

enum { /* flags of llm_detokenize */
  LLM_DETOKENIZE_RENDER_SPECIAL = 1u, /* write control tokens ("<s>") as text      */
  LLM_DETOKENIZE_STRIP_LEADING_SPACE = 2u /* drop the SentencePiece dummy-prefix space */
};

enum { /* llm_request.spec_mode and llm_ctx_params.spec_mode: speculative decoding */
  LLM_SPEC_AUTO = 0,  /* request: the context's default; context: DRAFT when a   */
                      /* draft is configured, else OFF                           */
  LLM_SPEC_OFF = 1,   /* no speculation                                          */
  LLM_SPEC_NGRAM = 2, /* drafts copied from earlier text (prompt lookup)         */
  LLM_SPEC_DRAFT = 3  /* the context's draft model or self-draft layers          */
};

enum { /* llm_ctx_params.preempt_mode: what happens to a running sequence when */
        /* the KV pool runs out and it must make room (the lowest-priority,     */
        /* most recently submitted sequence goes first)                         */
  LLM_PREEMPT_RECOMPUTE = 0, /* its blocks are freed; it waits at the front of */
                             /* its priority class and recomputes its prompt   */
                             /* and output so far when readmitted (the prefix  */
                             /* cache often serves the prompt)                 */
  LLM_PREEMPT_SWAP = 1       /* its KV blocks are copied to a host swap space  */
                             /* (llm_ctx_params.swap_space_bytes) and back on  */
                             /* readmission, and it goes on decoding with no   */
                             /* recompute. Blocks it shares with a running     */
                             /* sequence through the prefix cache are not      */
                             /* copied but taken back from the cache (if one   */
                             /* was evicted meanwhile, that sequence           */
                             /* recomputes). When the swap space is full, the  */
                             /* sequence is preempted by recompute instead.    */
};

enum { /* llm_ctx_params.kv_type: element type of the KV cache                 */
  LLM_KV_AUTO = 0, /* the backend's own: F16 on the CPU, BF16 on CUDA          */
  LLM_KV_F32 = 1,  /* 4 bytes per element (CPU only)                            */
  LLM_KV_F16 = 2,  /* IEEE half, 2 bytes per element                           */
  LLM_KV_Q8_0 = 3, /* int8 with one F32 scale per head_dim row of each          */
                   /* position's K and V                                        */
  LLM_KV_Q4_0 = 4, /* GGUF's Q4_0 blocks: 4-bit values with one F16 scale per */
                   /* 32 (llama.cpp's rounding), 18 bytes per 32 values; CPU   */
                   /* and CUDA, head_dim a multiple of 32 up to 256. Rows are  */
                   /* Hadamard-rotated first (head_dim a multiple of 64), as   */
                   /* llama.cpp's quantized cache does                         */
  LLM_KV_FP8_E4M3 = 5 /* (0.6, issue 32) OCP FP8 E4M3 bytes with one F32 scale */
                   /* per 32 values (max|x| / 448), 36 bytes per 32 values;    */
                   /* CUDA only, compute capability 8.9 or newer (others and   */
                   /* the CPU refuse it with UNSUPPORTED), head_dim a multiple */
                   /* of 32. A CPU context imports its KV streams converted    */
};

/* A request seed with this value draws a random seed. */
#define LLM_SEED_RANDOM UINT64_MAX

/* ------------------------------------------------------- context params */
enum { /* llm_ctx_params.n_gpu_layers: besides a layer count (appended in 0.6) */
  LLM_GPU_LAYERS_ALL = -1, /* every layer on the GPU (the default)          */
  LLM_GPU_LAYERS_AUTO = -2 /* as many as fit the devices' free memory       */
                           /* (llama.cpp's -ngl auto / --fit): see the field */
};

enum { /* llm_ctx_params.moe_host_policy: where host-resident experts run   */
  LLM_MOE_HOST_AUTO = 0, /* per step, the cheaper by measured cost          */
  LLM_MOE_HOST_CPU = 1,  /* always the CPU                                  */
  LLM_MOE_HOST_COPY = 2  /* copy to the device cache whenever it can hold   */
                         /* the step's experts of the layer (else the CPU)  */
};

typedef struct llm_ctx_params {
  uint32_t struct_size;       /* = sizeof(llm_ctx_params), set by init       */
  int32_t backend;            /* LLM_BACKEND_*; default AUTO                 */
  const char* model_path;     /* GGUF file, or a Hugging Face directory      */
                              /* (config.json, *.safetensors,                */
                              /* tokenizer.json: Llama, Mistral, Qwen2,      */
                              /* Qwen3). NULL: the built-in stories260K      */
                              /* model (if this build embeds it)             */
  int32_t n_threads;          /* CPU compute threads; 0 = all cores         */
  int32_t n_ctx;              /* max tokens per sequence (prompt+output);   */
                              /* 0 = the model's training context           */
  int32_t kv_block_size;      /* tokens per KV block; 0 = 16                */
  int32_t n_kv_blocks;        /* KV pool size in blocks; 0 = enough for     */
                              /* max_seqs full-length sequences, on the CPU */
                              /* capped at 256 MiB of KV memory (but at     */
                              /* least one full-length sequence). The CPU   */
                              /* backend reserves the pool at creation and  */
                              /* commits it in 2 MiB steps as blocks are    */
                              /* first written (llm_stats.kv_bytes).        */
  int32_t max_seqs;           /* sequences per engine step; 0 = 16          */
  int32_t max_batch_tokens;   /* token budget per engine step; 0 = 512      */
  int32_t max_queued;         /* pending requests before BUSY; 0 = 1024     */
  int32_t preempt_mode;       /* LLM_PREEMPT_*; default RECOMPUTE (0; this  */
                              /* field was `reserved0`, which had to be 0)  */
  /* --- appended in 0.1: speculative decoding (the output is distributed   */
  /* exactly as without it; greedy output is identical token for token) --- */
  const char* draft_model_path; /* GGUF draft model with the target's       */
                              /* vocabulary (checked at load: else          */
                              /* INVALID_ARGUMENT); NULL = none             */
  int32_t self_draft_layers;  /* > 0: draft with the target's own first N   */
                              /* layers + output head (no second file, no   */
                              /* weight copy); 0 = off. Not with            */
                              /* draft_model_path.                          */
  int32_t spec_mode;          /* LLM_SPEC_*: what requests with spec_mode   */
                              /* AUTO get; default AUTO                     */
  int32_t spec_k;             /* drafts per round, [0, 32]; 0 = 4           */
  int32_t reserved1;          /* must be 0                                  */
  /* --- appended in 0.1: GPU memory --- */
  float gpu_memory_fraction;  /* CUDA: share of the device's total memory   */
                              /* this context may use for weights,          */
                              /* activations and the KV pool together       */
                              /* (what is in use by others counts against   */
                              /* it); the KV pool gets what is left, capped */
                              /* at n_kv_blocks when that is set (then too  */
                              /* little room is OUT_OF_MEMORY). In (0, 1];  */
                              /* 0 = 0.90 (default). Anything else (< 0,    */
                              /* > 1, NaN): INVALID_ARGUMENT. The CPU       */
                              /* backend ignores it (it is still checked).  */
                              /* Callers built against an older header      */
                              /* (smaller struct_size) get 0.90.            */
  int32_t reserved2;          /* must be 0                                  */
  /* --- appended in 0.1: preemption by swapping --- */
  uint64_t swap_space_bytes;  /* preempt_mode SWAP: host memory for         */
                              /* swapped-out KV blocks (page-locked on      */
                              /* CUDA), reserved at creation; whole blocks  */
                              /* of the pool's format (kv_type, kv_type_v;  */
                              /* AUTO is BF16 on CUDA) count. 0 = the KV    */
                              /* pool's size, at most 1 GiB. Less than one  */
                              /* block, or over 2^24 blocks:                */
                              /* INVALID_ARGUMENT. Must be 0 with           */
                              /* preempt_mode RECOMPUTE (else               */
                              /* INVALID_ARGUMENT).                         */
  /* --- appended in 0.3: KV cache element type --- */
  int32_t kv_type;            /* LLM_KV_*; default AUTO (F16 on the CPU:    */
                              /* half of F32's memory per token, perplexity */
                              /* within 0.1%). The CPU backend reads F32,   */
                              /* F16, Q8_0 and Q4_0 in its attention kernels */
                              /* directly; CUDA reads BF16 (its AUTO), F16, */
                              /* Q8_0 and Q4_0 directly and refuses F32     */
                              /* with UNSUPPORTED. V takes kv_type too      */
                              /* unless kv_type_v names another type (both  */
                              /* backends store each side in its own type). */
                              /* Another value: INVALID_ARGUMENT. Callers   */
                              /* built against an older header get AUTO.    */
  int32_t kv_type_v;          /* (0.6, was reserved3; issue 32) LLM_KV_*:   */
                              /* the element type of V when it differs from */
                              /* K's (llama.cpp's -ctk / -ctv: e.g. K Q8_0, */
                              /* V F16). 0 (LLM_KV_AUTO, the default and    */
                              /* what every caller of an older header       */
                              /* passes) = as kv_type. Both backends store  */
                              /* and read each side in its own type         */
                              /* (llm_stats.kv_pool_bytes: the sum of both  */
                              /* sides), each side allowed where it is      */
                              /* allowed as kv_type (on CUDA: not F32; FP8  */
                              /* E4M3 on 8.9+; Q4_0 and FP8 need head_dim   */
                              /* a multiple of 32), else UNSUPPORTED naming */
                              /* the side. On CUDA two types also need a    */
                              /* kv_block_size whose tiles keep each side   */
                              /* aligned (a multiple of 8 always does; the  */
                              /* default 16 does), else UNSUPPORTED.        */
                              /* Another value: INVALID_ARGUMENT.           */
  /* --- appended in 0.3: partial offload (llama.cpp's -ngl) --- */
  int32_t n_gpu_layers;       /* With the CUDA backend: how many of the     */
                              /* model's layers run on the GPU, the first   */
                              /* ones; the rest, with the final norm and    */
                              /* the classifier, run on the CPU backend,    */
                              /* each layer's KV cache where the layer runs */
                              /* (for a model too large for the device;     */
                              /* gpu_memory_fraction then sizes the KV pool */
                              /* by the device layers alone; the host       */
                              /* layers' KV is kv_type (AUTO: F16; the      */
                              /* device layers' AUTO is BF16), the same     */
                              /* block count,                               */
                              /* its default held to the CPU's 256 MiB      */
                              /* unless n_kv_blocks is set; steps run       */
                              /* without CUDA graphs). -1 (default),        */
                              /* or any value >= the model's layer count:   */
                              /* every layer on the GPU. 0: the CPU backend */
                              /* runs everything (llm_stats.backend says    */
                              /* LLM_BACKEND_CPU).                          */
                              /* LLM_GPU_LAYERS_AUTO (-2, appended in 0.6,  */
                              /* issue 35): chosen at creation, before any  */
                              /* weight reaches a device, from each         */
                              /* device's free memory: its share            */
                              /* (gpu_memory_fraction of its total, less    */
                              /* what is in use now) less a 256 MiB margin  */
                              /* must hold its layers' weights as the       */
                              /* backend stores them, the KV pool the       */
                              /* context asks for (n_kv_blocks, else        */
                              /* max_seqs sequences of n_ctx tokens, in     */
                              /* kv_type), the embedding and output         */
                              /* matrices, and the workspaces. The most     */
                              /* layers that fit, split over the devices    */
                              /* in proportion to their free memory (or     */
                              /* tensor_split; main_gpu >= 0: that device   */
                              /* alone); on one device, for a model with    */
                              /* experts whose dense part fits but not all  */
                              /* its experts, the experts of the fewest     */
                              /* first layers go to host memory (n_cpu_moe, */
                              /* when the caller left it 0) rather than     */
                              /* whole layers to the CPU. The choice is     */
                              /* written to stderr ("llmrt: n_gpu_layers    */
                              /* auto: ...") and reported by                */
                              /* llm_get_device_stats (layers and bytes per */
                              /* device) and llm_stats (backend,            */
                              /* moe_host_layers). When not even one layer  */
                              /* fits: with backend AUTO the CPU backend    */
                              /* runs everything (and says so on stderr);   */
                              /* with backend CUDA, OUT_OF_MEMORY naming    */
                              /* the bytes needed and free.                 */
                              /* < -2: INVALID_ARGUMENT. Ignored when the   */
                              /* backend is the CPU (chosen, or what AUTO   */
                              /* picked), as llama.cpp ignores -ngl without */
                              /* a GPU. Callers built against an older      */
                              /* header get -1.                             */
  int32_t reserved4;          /* must be 0                                  */
  /* --- appended in 0.4 (issue 30): tiers under the prefix cache. KV      */
  /* blocks evicted from the pool's prefix cache go down to host memory,   */
  /* then to disk, instead of being dropped; a request whose prefix the    */
  /* pool lacks copies them back before computing (its cached-token count  */
  /* includes them; the output is the same as computing them). LRU per     */
  /* tier. CPU and CUDA backends (on CUDA the host tier is page-locked     */
  /* memory, its copies asynchronous); partial offload with a tier gets    */
  /* UNSUPPORTED. Callers built against an older header get no tiers.      */
  /* llm_stats.kv_tier_* count what they do. --- */
  uint64_t kv_host_bytes;     /* host-memory tier budget in bytes; 0 = none. */
                              /* Less than one KV block: INVALID_ARGUMENT.  */
  const char* kv_disk_dir;    /* disk tier directory (created if missing),  */
                              /* one file per block, kept across contexts   */
                              /* and restarts: a context's cached blocks    */
                              /* are written there at llm_ctx_destroy, so   */
                              /* the next context on the directory finds    */
                              /* them. Files are checked before use (model  */
                              /* fingerprint, KV geometry, a checksum per   */
                              /* block): another model's are ignored, a     */
                              /* corrupt one deleted. A directory that      */
                              /* cannot be written, or a full disk, turns   */
                              /* the tier off with a warning on stderr:     */
                              /* never a failed request. NULL = none.       */
  uint64_t kv_disk_bytes;     /* disk tier budget in bytes (least recently  */
                              /* used files deleted beyond it); 0 = 4 GiB.  */
                              /* Less than one KV block: INVALID_ARGUMENT.  */
  /* --- appended in 0.5 (issue 33): prefill/decode disaggregation over     */
  /* UCX (docs/DISAGG.md). A producer runs a request's prompt and holds its  */
  /* KV under a lease; its final event carries a transfer descriptor; a     */
  /* consumer given that descriptor pulls the KV over UCX before the        */
  /* request is scheduled, or computes the prompt itself when anything      */
  /* fails. A library built without UCX refuses any role (UNSUPPORTED).     */
  /* Callers built against an older header get no role. --- */
  int32_t kv_role;            /* LLM_KV_ROLE_*; default NONE                */
  int32_t kv_lease_ms;        /* producer: how long an unfetched transfer   */
                              /* is held (each pull step extends it);       */
                              /* 0 = 30000; < 0: INVALID_ARGUMENT           */
  const char* kv_listen_addr; /* producer: "host:port" UCX listens on (port */
                              /* 0: any free one; the descriptor names the  */
                              /* one taken); NULL = "127.0.0.1:0"           */
  /* --- appended in 0.6 (issue 35): Mixture-of-Experts experts in host     */
  /* memory on the CUDA backend (llama.cpp's --n-cpu-moe). The experts of    */
  /* the chosen MoE layers stay in page-locked host memory; per step and     */
  /* layer, after the router ran on the device, either the CPU computes the  */
  /* chosen experts on the tokens routed to them (hidden states go down and  */
  /* back up), or the chosen experts are copied into a device expert cache   */
  /* and run there: the cheaper by measured cost (bytes to copy over the     */
  /* measured bandwidth vs measured CPU time per pick), unless               */
  /* moe_host_policy forces one. No CUDA graphs while any layer is host-     */
  /* resident. Ignored by the CPU backend and by models without experts.     */
  /* llm_stats.moe_* count what they do. Callers built against an older      */
  /* header keep every expert on the device. --- */
  int32_t n_cpu_moe;          /* experts of the first N MoE layers in host  */
                              /* memory; -1 = every MoE layer; 0 = none.    */
                              /* < -1: INVALID_ARGUMENT                     */
  int32_t moe_host_policy;    /* LLM_MOE_HOST_*; default AUTO               */
  uint64_t moe_cache_bytes;   /* device expert cache budget in bytes; 0 =   */
                              /* one layer's experts. Less than one expert  */
                              /* (gate + up + down): INVALID_ARGUMENT       */
  int32_t moe_prefetch;       /* 1 = while a host layer runs, copy the      */
                              /* experts the next host layer is predicted   */
                              /* to use (inter-layer affinity gathered      */
                              /* online from routing) into the cache on a   */
                              /* second stream; 0 = the default (on), -1 =  */
                              /* off. Outputs do not depend on it.          */
  int32_t reserved5;          /* must be 0                                  */
  /* --- appended in 0.6 (issue 35): several GPUs. With the CUDA backend   */
  /* the device layers (n_gpu_layers) are split by layer over the visible  */
  /* devices, llama.cpp's default layer split: consecutive runs of layers, */
  /* one per device in ordinal order, each device holding its layers'      */
  /* weights and KV cache (llm_get_device_stats reports each). Callers    */
  /* against an older header get the defaults (-1, all 0). --- */
  int32_t main_gpu;           /* -1 (default): split over every device with */
                              /* a share; >= 0: that device alone runs the  */
                              /* device layers (llama.cpp's --main-gpu with */
                              /* --split-mode none). < -1, or (where CUDA   */
                              /* runs) a device that does not exist:        */
                              /* INVALID_ARGUMENT.                          */
  float tensor_split[LLM_MAX_DEVICES]; /* each device's share of the        */
                              /* device layers (llama.cpp's --tensor-split, */
                              /* proportions, e.g. 3,1); all 0 (default):   */
                              /* in proportion to each device's free memory.*/
                              /* Negative, NaN or infinite values, a share  */
                              /* for a device that does not exist, or a     */
                              /* split with main_gpu >= 0: INVALID_ARGUMENT */
                              /* (the last two only where CUDA runs).       */
                              /* n_cpu_moe != 0 on a model with experts     */
                              /* while the layers are split over more than  */
                              /* one device: UNSUPPORTED (set main_gpu).    */
  /* --- appended in 0.7 (issue 36: images in the prompt); an older        */
  /* caller's smaller struct_size leaves mmproj_path NULL --- */
  int32_t reserved6;          /* must be 0                                  */
  const char* mmproj_path;    /* a projector file (llama.cpp's --mmproj:    */
                              /* GGUF with general.architecture "clip") for */
                              /* image parts (llm_content_part); NULL      */
                              /* (default): none, and requests with image   */
                              /* parts get INVALID_ARGUMENT. A file that    */
                              /* does not open: IO; not a projector file,   */
                              /* or one whose output width is not the text  */
                              /* model's n_embd, or for another family      */
                              /* (Gemma 3's projector with a non-gemma3     */
                              /* model): MODEL_FORMAT; a projector type     */
                              /* this build does not run: UNSUPPORTED.      */
                              /* Runs: "gemma3" (gemma3 models), "idefics3" */
                              /* (SmolVLM: llama models; a picture is tiled */
                              /* and laid out with its row/column tokens)   */
                              /* and "mlp" (LLaVA-style CLIP + MLP: llama)  */
} llm_ctx_params;

/* llm_ctx_params.kv_role */
typedef enum llm_kv_role {
  LLM_KV_ROLE_NONE = 0,     /* neither: requests with kv_produce or a        */
                            /* kv_transfer_desc get INVALID_ARGUMENT         */
  LLM_KV_ROLE_PRODUCER = 1, /* serves transfers (llm_request.kv_produce)     */
  LLM_KV_ROLE_CONSUMER = 2, /* pulls them (llm_request.kv_transfer_desc)     */
  LLM_KV_ROLE_BOTH = 3
} llm_kv_role;

/* Fills *params with struct_size and defaults. NULL: LLM_ERR_NULL_ARGUMENT. */
LLM_API llm_status llm_ctx_params_init(llm_ctx_params* params);

/* ---------------------------------------------------------- sampling */
/* One entry of llm_sampling_params.logit_bias. */
typedef struct llm_logit_bias {
  llm_token token;
  float bias;
} llm_logit_bias;

typedef struct llm_sampling_params {
  uint32_t struct_size;       /* = sizeof(llm_sampling_params)              */
  float temperature;          /* 0 = greedy (argmax); must be >= 0; def 0.8 */
  int32_t top_k;              /* keep the k most likely; 0 = off; def 40    */
  float top_p;                /* nucleus, in (0, 1]; 1 = off; default 0.95  */
  float min_p;                /* in [0, 1]; 0 = off; default 0.05           */
  float repetition_penalty;   /* > 0; 1 = off (default)                     */
  float frequency_penalty;    /* in [-2, 2]; 0 = off (default)              */
  float presence_penalty;     /* in [-2, 2]; 0 = off (default)              */
  int32_t penalty_last_n;     /* tokens the penalties look back over;       */
                              /* -1 = whole sequence, 0 = none; default 64  */
  uint64_t seed;              /* same seed + same request = same output on  */
                              /* any thread count; LLM_SEED_RANDOM = random */
  /* --- appended in 0.2 (issue 20); older callers' smaller struct_size
   *     leaves these at their defaults (no bias) --- */
  const llm_logit_bias* logit_bias;       /* n_logit_bias (token, bias)    */
  int32_t n_logit_bias;       /* pairs; added to the raw logits before the  */
                              /* penalties and every filter, for every      */
                              /* token this request generates. Each token   */
                              /* in [0, n_vocab) at most once; each bias    */
                              /* finite in [-100, 100], or -INFINITY (the   */
                              /* token is never sampled). n in [0, n_vocab].*/
                              /* Copied at llm_submit. Default NULL, 0.     */
                              /* event.logprob stays the model's, unbiased. */
  int32_t reserved1;          /* must be 0                                  */
} llm_sampling_params;


/* Fills *params with struct_size and defaults. */
LLM_API llm_status llm_sampling_params_init(llm_sampling_params* params);

/* ------------------------------------------------------------ events */
typedef struct llm_metrics {
  int32_t prompt_tokens;        /* tokens in the prompt (incl. BOS)            */
  int32_t cached_prompt_tokens; /* of which were served from the prefix cache  */
  int32_t generated_tokens;     /* tokens generated for this sequence          */
  int32_t draft_tokens_proposed;/* speculative decoding: drafts proposed       */
  int32_t draft_tokens_accepted;/* ... and accepted                            */
  int32_t preemptions;          /* times the sequence was preempted (its KV    */
                                /* blocks recomputed or swapped to host)       */
  double queue_ms;              /* submit -> first scheduled                   */
  double ttft_ms;               /* submit -> first generated token             */
  double tpot_ms;               /* mean time per output token after the first  */
  double total_ms;              /* submit -> final event                       */
} llm_metrics;

/* One entry of llm_event.top_logprobs. */
typedef struct llm_top_logprob {
  llm_token token;
  float logprob;
} llm_top_logprob;

typedef struct llm_event {
  uint32_t struct_size;      /* see llm_poll                                  */
  int32_t type;              /* LLM_EVENT_*                                   */
  llm_request_id request_id; /* the id llm_submit returned                    */
  int32_t seq_index;         /* which of the request's n sequences (0..n-1)   */
  llm_token token;           /* TOKEN: the generated token id; FINAL: -1      */
  const char* text;          /* NUL-terminated UTF-8, whole code points only; */
                             /* TOKEN: may be "" while a split character or a */
                             /* possible stop string is held back; FINAL: the */
                             /* held-back rest, if any. Never NULL.           */
  uint32_t text_len;         /* bytes in text, without the NUL                */
  float logprob;             /* TOKEN: natural log-probability of `token`     */
                             /* under the model (before sampling transforms)  */
  int32_t finish_reason;     /* FINAL: LLM_FINISH_*; TOKEN: LLM_FINISH_NONE   */
  llm_status status;         /* FINAL: LLM_OK, or the error that ended it     */
  const char* message;       /* FINAL: "" or an error message; never NULL     */
  llm_metrics metrics;       /* FINAL: this sequence's metrics                */
  const float* prompt_logprobs; /* FINAL, if requested: (n_prompt_logprobs)   */
                             /* log p(prompt[i+1] | prompt[0..i]), i = 0..    */
                             /* prompt_tokens-2; NULL otherwise               */
  int32_t n_prompt_logprobs;
  int32_t reserved0;
  /* --- appended in 0.2 (issue 20): written only when the caller's
   *     events[0].struct_size includes them --- */
  const llm_top_logprob* top_logprobs;        /* TOKEN, when the request    */
                             /* set top_logprobs = k > 0: the k most likely  */
                             /* tokens at this position with their logprobs  */
                             /* (same distribution as `logprob`: the model's */
                             /* log-softmax, before bias and sampling),      */
                             /* most likely first, ties by lower id. The     */
                             /* sampled token may or may not be among them.  */
                             /* NULL (and n 0) otherwise. Valid as long as   */
                             /* `text` (until the next llm_poll).            */
  int32_t n_top_logprobs;    /* = k for TOKEN events of such requests        */
  int32_t reserved1;
  /* --- appended in 0.4 (issue 31: embeddings); written only when the
   *     caller's events[0].struct_size includes them --- */
  const float* embedding;    /* FINAL of an LLM_TASK_EMBED request that     */
                             /* ended with LLM_OK: (n_embedding_rows,       */
                             /* n_embedding) floats, row-major (pooled,     */
                             /* truncated to `dimensions`, normalised as    */
                             /* asked; RANK pooling: the classifier's       */
                             /* score(s)). Valid as long as `text`. NULL    */
                             /* (and both counts 0) otherwise.              */
  int32_t n_embedding;       /* values per row                              */
  int32_t n_embedding_rows;  /* 1; the prompt's tokens for POOLING_NONE     */
  /* --- appended in 0.5 (issue 33: disaggregation); written only when the
   *     caller's events[0].struct_size includes them --- */
  const char* kv_transfer_desc; /* FINAL of a kv_produce request that ended */
                             /* with LLM_OK: the transfer descriptor (an     */
                             /* ASCII string to hand to a consumer's         */
                             /* llm_request.kv_transfer_desc); NULL when the */
                             /* prompt held no full KV block or otherwise.   */
                             /* Valid as long as `text`.                     */
  int32_t transferred_prompt_tokens; /* FINAL: prompt tokens whose KV       */
                             /* arrived by transfer (of cached_prompt_tokens)*/
  llm_status kv_transfer_status; /* FINAL of a request with a descriptor:   */
                             /* LLM_OK, or why the pull failed and the       */
                             /* prompt was computed here instead             */
  /* --- appended in 0.6 (issue 32: reasoning output); written only when the
   *     caller's events[0].struct_size includes them --- */
  const char* reasoning_text; /* a request with reasoning_format other than */
                             /* NONE: the thinking's share of this event's   */
                             /* text (NUL-terminated UTF-8, never NULL, ""   */
                             /* when none; the tags themselves are in        */
                             /* neither); `text` is then the answer's share. */
                             /* Valid as long as `text`.                     */
  uint32_t reasoning_text_len; /* bytes in reasoning_text, without the NUL */
  int32_t part;              /* TOKEN: LLM_PART_* the token belongs to: the */
                             /* part the output is in after it, or was in   */
                             /* before it (so "<think>", "</think>" and     */
                             /* harmony's <|message|> opening an analysis   */
                             /* and its <|end|> are REASONING); always      */
                             /* CONTENT without a reasoning_format. FINAL:  */
                             /* the part the sequence ended in (REASONING:  */
                             /* it stopped while thinking, e.g. max_tokens) */
} llm_event;

/* Which part of the output a token belongs to (llm_event.part). */
typedef enum llm_part {
  LLM_PART_CONTENT = 0,  /* the answer                                    */
  LLM_PART_REASONING = 1 /* the model's thinking                          */
} llm_part;


/* A token callback receives every event of its request (token events and the
 * final event), inside llm_poll, on the polling thread. `event` and the
 * pointers in it are valid only during the call. The callback must not call
 * llm_ctx_destroy on the same context; any other llm_* call is allowed. */
typedef void (*llm_event_callback)(const llm_event* event, void* user_data);

/* ------------------------------------------------------- content parts */

/* llm_content_part.kind */
typedef enum llm_content_kind {
  LLM_CONTENT_TEXT = 0,      /* text: NUL-terminated UTF-8                  */
  LLM_CONTENT_IMAGE = 1,     /* data, n_data: an encoded picture, PNG, JPEG */
                             /* or WebP (sniffed from its bytes; WebP in a  */
                             /* build with libwebp, and still pictures      */
                             /* only; GIF, BMP...: UNSUPPORTED), at most 64 */
                             /* MiB, each side at most 16384 pixels and at  */
                             /* most 2^26 pixels                            */
                             /* (else INVALID_ARGUMENT, from the header,    */
                             /* before any decoding). Alpha is dropped (the */
                             /* colour under it kept), 16-bit samples keep  */
                             /* their high byte, EXIF orientation is not    */
                             /* applied, CMYK is converted: as llama.cpp    */
                             /* loads pictures. Corrupt or truncated:       */
                             /* INVALID_ARGUMENT with the decoder's reason  */
  LLM_CONTENT_IMAGE_RGB = 2  /* data: width x height 8-bit RGB pixels, row  */
                             /* after row, no padding: n_data must be       */
                             /* width * height * 3; sides as for IMAGE      */
} llm_content_kind;

/* One part of a prompt or of a chat message: text or a picture. Borrowed
 * for the duration of the call that reads it (llm_submit copies). */
typedef struct llm_content_part {
  uint32_t struct_size;       /* = sizeof(llm_content_part)                 */
  int32_t kind;               /* LLM_CONTENT_*; default TEXT                */
  const char* text;           /* TEXT: UTF-8, NUL-terminated; else NULL     */
  const void* data;           /* IMAGE, IMAGE_RGB: the bytes; else NULL     */
  size_t n_data;              /* bytes at data                              */
  int32_t width;              /* IMAGE_RGB: the picture's size in pixels;   */
  int32_t height;             /* IMAGE: 0 (the file says)                   */
} llm_content_part;

/* Fills *part with struct_size and defaults (TEXT, all else NULL/0).
 * NULL: LLM_ERR_NULL_ARGUMENT. */
LLM_API llm_status llm_content_part_init(llm_content_part* part);

/* ------------------------------------------------------------ requests */
typedef struct llm_request {
  uint32_t struct_size;       /* = sizeof(llm_request)                      */
  uint32_t tokenize_flags;    /* LLM_TOKENIZE_*; default ADD_SPECIAL        */
  const char* prompt;         /* UTF-8, NUL-terminated; or NULL when        */
                              /* prompt_tokens is given                     */
  const llm_token* prompt_tokens; /* used verbatim (no BOS added) when     */
  int32_t n_prompt_tokens;    /* prompt is NULL                             */
  int32_t max_tokens;         /* > 0; tokens to generate at most; def 256   */
  const llm_sampling_params* sampling; /* NULL = defaults; copied at submit */
  const char* const* stop;    /* n_stop (<= 64) stop strings of 1 to 4096   */
  int32_t n_stop;             /* bytes (not included in the output); copied */
                              /* at submit                                  */
  int32_t ignore_eos;         /* 1: do not stop at EOS/EOG tokens           */
  int32_t n;                  /* parallel samples from one prompt; def 1    */
  int32_t priority;           /* higher runs first; default 0               */
  int32_t prompt_logprobs;    /* 1: final event carries prompt_logprobs     */
  int32_t reserved0;          /* must be 0                                  */
  llm_event_callback callback;/* NULL: events go to llm_poll's array        */
  void* user_data;            /* passed to callback                          */
  /* --- appended in 0.1 (after the first layout) --- */
  uint64_t cache_salt;        /* prefix-cache partition: requests share     */
                              /* cached KV blocks only with equal salts     */
                              /* (e.g. one salt per tenant); default 0      */
  int32_t spec_mode;          /* LLM_SPEC_*; default AUTO (the context's);  */
                              /* DRAFT needs a context with a draft         */
  int32_t spec_k;             /* drafts per round, [0, 32]; 0 = context's   */
  /* --- appended in 0.2 (issue 20); an older caller's smaller struct_size
   *     leaves them at their defaults (0 / NULL: off) --- */
  const llm_token* stop_token_ids; /* n_stop_token_ids ids that end a       */
  int32_t n_stop_token_ids;   /* sequence (finish STOP) like EOS, even with */
                              /* ignore_eos; their text is not streamed.    */
                              /* Each in [0, n_vocab); at most 1024.        */
                              /* Copied at submit. Default NULL, 0.         */
  int32_t min_tokens;         /* in [0, max_tokens]: until a sequence has   */
                              /* generated this many tokens, EOS/EOG tokens */
                              /* (unless ignore_eos) and stop_token_ids get */
                              /* probability 0. Stop strings still apply.   */
                              /* Default 0                                  */
  int32_t top_logprobs;       /* in [0, 20]: each TOKEN event carries the k */
                              /* most likely tokens (llm_event.top_logprobs)*/
                              /* Default 0                                  */
  int32_t reserved1;          /* must be 0                                  */
  /* --- appended in 0.3 (issue 20: constrained decoding); an older caller's
   *     smaller struct_size leaves constraint_kind at NONE --- */
  int32_t constraint_kind;    /* LLM_CONSTRAINT_*; default NONE             */
  int32_t n_choices;          /* CHOICE: the number of strings in choices   */
  const char* constraint;     /* JSON_SCHEMA: the schema (JSON text);       */
                              /* REGEX: the pattern; GRAMMAR: the grammar   */
                              /* (docs/GRAMMAR.md, GBNF-compatible, root    */
                              /* rule `root`); NULL for NONE, JSON_OBJECT   */
                              /* and CHOICE. UTF-8, NUL-terminated; copied  */
                              /* (compiled) at submit                       */
  const char* const* choices; /* CHOICE: the output is exactly one of these */
                              /* n_choices UTF-8 strings; copied at submit  */
  /* --- appended in 0.4 (issue 31: embeddings and reranking); an older
   *     caller's smaller struct_size leaves task at GENERATE --- */
  int32_t task;               /* LLM_TASK_*; default GENERATE               */
  int32_t pooling;            /* EMBED: LLM_POOLING_*; default MODEL (the   */
                              /* file's pooling_type)                       */
  int32_t normalize;          /* EMBED: 1 (default) divides each vector by  */
                              /* its L2 norm (after `dimensions`); 0: raw.  */
                              /* Never applied to RANK scores               */
  int32_t dimensions;         /* EMBED: 0 (default) = all; else keep the    */
                              /* first `dimensions` values of each vector   */
                              /* (Matryoshka), 1 .. the model's size, else  */
                              /* INVALID_ARGUMENT at submit                 */
  int32_t truncate;           /* EMBED: 0 (default): a prompt longer than   */
                              /* n_ctx is refused (CONTEXT_OVERFLOW);       */
                              /* 1: only its first n_ctx tokens are used    */
                              /* (metrics.prompt_tokens says how many)      */
  int32_t reserved2;          /* must be 0                                  */
  /* --- appended in 0.4 (issue 30); an older caller's smaller struct_size
   *     leaves keep_kv at 0 --- */
  int32_t keep_kv;            /* 1: when the request finishes, its prompt   */
                              /* and output blocks stay in the prefix cache */
                              /* at the protected end of the eviction order:*/
                              /* evicted only after every unprotected block */
                              /* (a conversation to continue or export with */
                              /* llm_kv_export). 0 (default): ordinary LRU. */
                              /* Other values: INVALID_ARGUMENT.            */
  /* --- 0.5 (issue 29): the 0.4 layout's reserved3, so the size and every
   *     offset are unchanged; an older caller's 0 is the default --- */
  int32_t constraint_whitespace; /* LLM_WHITESPACE_*: JSON_OBJECT and       */
                              /* JSON_SCHEMA outputs' blanks between tokens.*/
                              /* BOUNDED (0, default): none, one space, or  */
                              /* one newline + at most 4 spaces per open    */
                              /* object/array (docs/GRAMMAR.md); FREE: any  */
                              /* JSON whitespace. Other kinds ignore it;    */
                              /* other values: INVALID_ARGUMENT             */
  /* --- appended in 0.5 (issue 33: disaggregation); an older caller's
   *     smaller struct_size leaves both unset --- */
  const char* kv_transfer_desc; /* consumer context: a producer's           */
                              /* descriptor (llm_event.kv_transfer_desc) for */
                              /* this prompt; llm_submit pulls the KV before */
                              /* it returns (bounded by timeouts and the     */
                              /* lease) and the request reuses it as cached  */
                              /* prefix. A failed pull (producer gone, lease */
                              /* expired, another model, a corrupt or short  */
                              /* transfer) is logged on stderr and the       */
                              /* prompt is computed: never an error, never a */
                              /* token from bad KV (event.kv_transfer_status */
                              /* says why). A descriptor that does not parse:*/
                              /* INVALID_ARGUMENT. NULL (default): none.     */
  int32_t kv_produce;         /* producer context: 1 = when the request      */
                              /* finishes, hold its prompt's full KV blocks  */
                              /* under a lease and put a descriptor in its   */
                              /* final event. 0 (default). Other values:     */
                              /* INVALID_ARGUMENT                            */
  int32_t reserved4;          /* must be 0                                  */
  /* --- appended in 0.6 (issue 32: reasoning output); an older caller's
   *     smaller struct_size leaves it at NONE --- */
  int32_t reasoning_format;   /* LLM_REASONING_*: keep the model's thinking */
                              /* apart from its answer (llm_event's         */
                              /* reasoning_text and part); default NONE     */
  int32_t reserved5;          /* must be 0                                  */
  /* --- appended in 0.7 (issue 36: images in the prompt); an older caller's
   *     smaller struct_size leaves parts NULL --- */
  const llm_content_part* parts; /* the prompt as n_parts parts (text and  */
  int32_t n_parts;            /* images, llm_content_part), in order; or    */
                              /* NULL, 0 (default). Exclusive with prompt   */
                              /* and prompt_tokens (more than one set:      */
                              /* INVALID_ARGUMENT). The text between two    */
                              /* pictures is one run (text parts joined),   */
                              /* tokenized with tokenize_flags, as          */
                              /* llama.cpp's multimodal tokenizer does:     */
                              /* ADD_SPECIAL adds BOS before the first run  */
                              /* only; with image parts special tokens are  */
                              /* always parsed (PARSE_SPECIAL).             */
                              /* Each image stands where its part stands,   */
                              /* wrapped in the model's image markers       */
                              /* (Gemma 3: "<start_of_image>" ...           */
                              /* "<end_of_image>"); but when the text parts */
                              /* hold the model's image marker (as          */
                              /* llm_chat_apply_template_v2 renders it),    */
                              /* the markers are the images' places, in     */
                              /* order, and their count must equal the      */
                              /* image parts' (else INVALID_ARGUMENT). The  */
                              /* bytes are decoded and copied before        */
                              /* llm_submit returns. At most 64 images.     */
                              /* Image parts need a context with an         */
                              /* mmproj_path (else INVALID_ARGUMENT).       */
                              /* The CPU backend runs them: an explicit     */
                              /* LLM_BACKEND_CUDA with an mmproj_path is    */
                              /* refused (UNSUPPORTED); AUTO runs such a    */
                              /* context on the CPU, with a message.        */
  int32_t reserved6;          /* must be 0                                  */
} llm_request;

/* How a request's output is split into thinking and answer
 * (llm_request.reasoning_format). With any value but NONE:
 *  - each event's text is cut in two: `text` the answer's share,
 *    `reasoning_text` the thinking's; the markup ("<think>", "</think>",
 *    harmony's headers) is in neither, nor is the whitespace around the
 *    thinking. A tag split across tokens is held back until it is whole.
 *    Thinking that never ends (max_tokens, a stop string) stays reasoning.
 *  - an output constraint (constraint_kind) applies to the answer only: the
 *    thinking is not masked, and the constraint starts at the token after
 *    the one that ends the thinking (after "</think>" when the prompt opened
 *    the thinking; harmony: after the header of the message that begins the
 *    answer). Speculation is paused until then.
 *  - stop strings and stop_token_ids still apply to the whole output.
 * A template that opens the thinking in the prompt (Qwen3 and DeepSeek-R1
 * generation prompts ending with "<think>\n") is seen from the prompt's
 * text: the output then starts inside the thinking. One that closes it
 * there (Qwen3 with enable_thinking false: "<think>\n\n</think>\n\n")
 * makes the whole output the answer (DEEPSEEK then acts as NONE). Otherwise
 * a DEEPSEEK output may open its own thinking with "<think>" (Qwen3's own
 * template); under a constraint it can only where the constraint allows it:
 * the constraint then masks from the first token, as without a format. */
typedef enum llm_reasoning_format {
  LLM_REASONING_NONE = 0,     /* one text, as the model wrote it            */
  LLM_REASONING_DEEPSEEK = 1, /* <think>...</think> then the answer (Qwen3, */
                              /* DeepSeek-R1 and distills, QwQ)             */
  LLM_REASONING_HARMONY = 2,  /* gpt-oss's harmony messages (special tokens */
                              /* rendered): analysis = thinking, final =    */
                              /* answer, commentary to=functions.NAME = a   */
                              /* tool call written into the answer as       */
                              /* <tool_call>{"name": "NAME", "arguments":   */
                              /* ARGS}</tool_call> (llm_chat_parse_tool_calls*/
                              /* reads it), other commentary = answer       */
  LLM_REASONING_AUTO = 3      /* the model's chat template decides: HARMONY */
                              /* when it writes harmony channels, DEEPSEEK  */
                              /* when it writes <think>, else NONE          */
} llm_reasoning_format;

/* What a request asks of the model (llm_request.task).
 * EMBED runs the prompt through an embedding model (an encoder such as BERT:
 * ModelArch `bert`; llm_model_info.n_embd values per vector) and its final
 * event carries the vector(s) (llm_event.embedding); no token events, max_tokens,
 * sampling, n, stop strings, constraints or speculation apply (they are
 * ignored). A context whose model does not make embeddings refuses EMBED at
 * llm_submit with LLM_ERR_UNSUPPORTED and a message, and an embedding model
 * refuses GENERATE the same way. An empty prompt is INVALID_ARGUMENT.
 * Embedding requests go through the same queue, limits, priorities,
 * cancellation (LLM_FINISH_CANCELLED before they ran) and polling as
 * generation; the engine runs many of them per step. A text's vector does not
 * depend on the other requests it is batched with (bitwise on the CPU). */
typedef enum llm_task {
  LLM_TASK_GENERATE = 0,
  LLM_TASK_EMBED = 1
} llm_task;

/* How hidden states become the output (llm_request.pooling); the values
 * >= 0 are GGUF's pooling_type (llama.cpp's). */
typedef enum llm_pooling {
  LLM_POOLING_MODEL = -1, /* the model file's pooling_type                  */
  LLM_POOLING_NONE = 0,   /* every prompt token's vector (n_embedding_rows  */
                          /* = prompt tokens)                               */
  LLM_POOLING_MEAN = 1,   /* the mean of the tokens' vectors                */
  LLM_POOLING_CLS = 2,    /* the first token's vector                       */
  LLM_POOLING_LAST = 3,   /* the last token's vector                        */
  LLM_POOLING_RANK = 4    /* the classifier head's score(s) on the first    */
                          /* token (rerankers); never normalised            */
} llm_pooling;

/* What a request's output must match (llm_request.constraint_kind). The
 * constraint is compiled at llm_submit (an invalid one fails there with
 * LLM_ERR_INVALID_ARGUMENT and a message naming the position); each sampled
 * token then keeps the output a prefix of a matching string, and EOS/EOG is
 * allowed exactly when the output so far is complete. */
typedef enum llm_constraint_kind {
  LLM_CONSTRAINT_NONE = 0,
  LLM_CONSTRAINT_JSON_SCHEMA = 1, /* JSON text valid against `constraint`    */
  LLM_CONSTRAINT_JSON_OBJECT = 2, /* any JSON object                         */
  LLM_CONSTRAINT_REGEX = 3,       /* the whole output matches `constraint`   */
  LLM_CONSTRAINT_CHOICE = 4,      /* exactly one of `choices`                */
  LLM_CONSTRAINT_GRAMMAR = 5      /* the EBNF grammar in `constraint`        */
} llm_constraint_kind;

/* The whitespace a JSON constraint allows (llm_request.constraint_whitespace).
 * Whatever it is, a constrained request ends with a complete value whenever
 * max_tokens leaves room for its shortest completion and the end token: the
 * mask keeps only tokens after which that still holds (docs/GRAMMAR.md). */
typedef enum llm_constraint_whitespace {
  LLM_WHITESPACE_BOUNDED = 0, /* none, " ", or "\n" + indentation by depth  */
  LLM_WHITESPACE_FREE = 1     /* any run of space, tab, newline, CR         */
} llm_constraint_whitespace;

/* Fills *request with struct_size and defaults. */
LLM_API llm_status llm_request_init(llm_request* request);

/* ------------------------------------------------------------ context */

/* Loads the model, reserves the KV pool, starts the engine thread.
 * params: NULL means all defaults (the built-in model).
 * On success *out_ctx owns everything; free it with llm_ctx_destroy.
 * Errors: NULL_ARGUMENT (out_ctx), STRUCT_SIZE, INVALID_ARGUMENT, IO (missing
 * file), MODEL_FORMAT (corrupt file), UNSUPPORTED (architecture, tensor type,
 * backend not built; LLM_BACKEND_CUDA for a model the CUDA backend does not
 * run — Mixture-of-Experts models run on the CPU, which AUTO then picks; the
 * dense families, Gemma 3 included, run on both), OUT_OF_MEMORY.
 * *out_ctx is set to NULL on failure. */
LLM_API llm_status llm_ctx_create(const llm_ctx_params* params, llm_ctx** out_ctx);

/* Cancels every request in flight, stops the engine thread, frees all memory.
 * Requests still queued or running are simply dropped: no FINAL event is
 * produced and no callback is called (from destroy or later), and events not
 * yet polled are discarded. The user_data of callback requests is not touched
 * after destroy returns. NULL is a no-op. May be called from any thread, not
 * only the creating one, but must not race other calls on ctx, and must not be
 * called from a token callback of the same context. */
LLM_API void llm_ctx_destroy(llm_ctx* ctx);

/* Queues a request and returns at once with its id in *out_id (never 0) --
 * but for a kv_transfer_desc on a consumer context, whose KV pull and import
 * run first (each step bounded by a timeout; docs/DISAGG.md).
 * The library copies everything it needs from *request (prompt, tokens, stop
 * strings, sampling params) before returning.
 * Errors: NULL_ARGUMENT, STRUCT_SIZE, INVALID_ARGUMENT (max_tokens <= 0,
 * sampling values out of range, n out of range, token id out of vocabulary
 * (prompt, logit_bias, stop_token_ids), a logit bias that is NaN, +inf or
 * outside [-100, 100], a token biased twice, min_tokens outside
 * [0, max_tokens], top_logprobs outside [0, 20], empty prompt), INVALID_UTF8, CONTEXT_OVERFLOW (prompt does not fit the
 * context, or cannot fit the KV pool), BUSY (queue full: retry after polling),
 * SHUTDOWN. A rejected request produces no events.
 * May be called from inside a token callback (on any context): the new
 * request is queued as from any other thread; its own callback runs in a
 * later llm_poll (or later in the same one). */
LLM_API llm_status llm_submit(llm_ctx* ctx, const llm_request* request, llm_request_id* out_id);

/* Asks the engine to stop request `id`. It stops at the next step boundary
 * (within one prefill chunk); its sequences end with a FINAL event whose
 * finish_reason is LLM_FINISH_CANCELLED, unless they finished first. Every
 * sequence still gets exactly one FINAL event.
 * Unknown ids (0, ids never returned by this context, ids of another context)
 * and ids whose request has finished give NOT_FOUND and change nothing. A
 * request counts as finished once the engine has produced the FINAL events of
 * all its sequences, which may be before they are polled. Cancelling the same
 * request again before it finishes is harmless (OK or NOT_FOUND). A request
 * swapped out (LLM_PREEMPT_SWAP) gives its swap space back when cancelled.
 * May be called from inside a token callback, including the callback of the
 * request being cancelled.
 * Errors: NULL_ARGUMENT, NOT_FOUND (unknown or already finished id). */
LLM_API llm_status llm_cancel(llm_ctx* ctx, llm_request_id id);

/* Drains events. Before the call, set events[0].struct_size =
 * sizeof(llm_event): the library writes events with that stride, so a caller
 * built against an older (smaller) llm_event keeps working; a size it does not
 * know gives LLM_ERR_STRUCT_SIZE. Every written event has struct_size set.
 * Events of requests with a callback are handed to that
 * callback (on this thread); the others are copied into events[0..cap).
 * Waits up to timeout_ms milliseconds (0: do not wait, -1: no limit) until at
 * least one event was delivered, llm_wakeup was called, or time ran out.
 * *n_out receives the number of events written into `events`.
 * events may be NULL when capacity is 0 (callbacks only); with capacity 0
 * nothing is read from or written to events. Events that need the array are
 * never dropped: they stay queued for a later poll with room, and delivery
 * stops at the first of them (so no request's events are reordered) -
 * while one is queued, a poll with capacity 0 returns at once with *n_out 0.
 * Pointers inside the returned events stay valid until the next llm_poll on
 * this context (from any thread) or llm_ctx_destroy.
 * Polls are serialized; a callback must not call llm_poll: it gets
 * INVALID_ARGUMENT and nothing is delivered (every other llm_* call, except
 * llm_ctx_destroy of the same context, is allowed from a callback).
 * Errors: NULL_ARGUMENT (ctx, n_out, or events with capacity > 0),
 * STRUCT_SIZE, INVALID_ARGUMENT. */
LLM_API llm_status llm_poll(llm_ctx* ctx, llm_event* events, uint32_t capacity, uint32_t* n_out,
                            int32_t timeout_ms);

/* Makes a blocked llm_poll on ctx return (with whatever it has, maybe 0
 * events). A wakeup with no poll waiting makes the next poll return at once.
 * Errors: NULL_ARGUMENT. */
LLM_API llm_status llm_wakeup(llm_ctx* ctx);

/* -------------------------------------------------------------- stats */
typedef struct llm_stats {
  uint32_t struct_size;        /* caller sets = sizeof(llm_stats)            */
  int32_t backend;             /* LLM_BACKEND_CPU or LLM_BACKEND_CUDA in use */
  uint64_t requests_submitted;
  uint64_t requests_finished;  /* finished by stop/length/cancel/error       */
  uint64_t prompt_tokens;      /* prompt tokens computed (cache hits excluded) */
  uint64_t generated_tokens;
  uint64_t steps;              /* engine steps (batched forward passes)      */
  int32_t queue_depth;         /* requests waiting to be scheduled           */
  int32_t running;             /* sequences running                          */
  int32_t kv_blocks_total;
  int32_t kv_blocks_used;      /* referenced by running sequences            */
  int32_t kv_blocks_free;      /* free (including cached)                    */
  int32_t kv_blocks_cached;    /* free but still holding a cached prefix      */
  double uptime_s;             /* since llm_ctx_create                       */
  double prompt_tokens_per_s;  /* over busy time                             */
  double generated_tokens_per_s;
  /* --- appended in 0.1 (after the first layout) --- */
  uint64_t prefix_cache_queried_tokens; /* prompt tokens looked up in the cache */
  uint64_t prefix_cache_hit_tokens;     /* ... of which were found (hit rate =  */
                                        /* hit / queried)                       */
  uint64_t preemptions;        /* sequences preempted (recomputed or swapped) */
  int32_t waiting;             /* sequences waiting for admission             */
  int32_t reserved1;
  double kv_utilization;       /* time-averaged share of the slots in used    */
                               /* KV blocks that hold tokens (0..1), over the */
                               /* engine steps so far                         */
  /* --- appended in 0.1: speculative decoding --- */
  uint64_t draft_tokens_proposed; /* drafts verified by the target            */
  uint64_t draft_tokens_accepted; /* ... and accepted                         */
  uint64_t spec_rounds;        /* verification passes; tokens per pass =      */
                               /* 1 + accepted / spec_rounds                  */
  /* --- appended in 0.1: preemption by swapping (LLM_PREEMPT_SWAP) --- */
  uint64_t swap_outs;          /* preemptions that swapped the sequence out   */
                               /* (the other preemptions recomputed)          */
  uint64_t swap_ins;           /* swapped-out sequences resumed from host     */
                               /* memory without recompute                    */
  uint64_t swap_blocks_out;    /* KV blocks copied to host memory             */
  uint64_t swap_blocks_in;     /* ... and back into the pool                  */
  int32_t swap_blocks_total;   /* the swap space, in KV blocks (0: no swap)   */
  int32_t swap_blocks_used;    /* ... holding swapped-out sequences' blocks   */
  /* --- appended in 0.3: memory held (bytes) --- */
  uint64_t kv_bytes;           /* KV pool memory committed now: on the CPU    */
                               /* the pool is reserved as address space and   */
                               /* committed (in 2 MiB steps) as blocks are    */
                               /* first written; on CUDA the whole pool       */
  uint64_t kv_pool_bytes;      /* the whole pool, committed or not:           */
                               /* kv_blocks_total blocks of the kv_type (K)   */
                               /* and kv_type_v (V)                           */
  uint64_t weight_bytes;       /* model weights the backend reads: the mapped */
                               /* file's tensors (less those whose packed CPU */
                               /* copy replaced them) plus packed or device   */
                               /* copies                                      */
  uint64_t scratch_bytes;      /* activation buffers and the swap space       */
  /* --- appended in 0.4 (issue 30): KV tiers (llm_ctx_params.kv_*) --- */
  uint64_t kv_tier_host_hit_tokens; /* prompt tokens copied back from host    */
                               /* memory instead of computed                  */
  uint64_t kv_tier_disk_hit_tokens; /* ... from the disk tier                 */
  uint64_t kv_tier_bytes_down; /* KV bytes copied from the pool into a tier   */
  uint64_t kv_tier_bytes_up;   /* ... and from a tier back into the pool      */
  uint64_t kv_tier_host_bytes; /* held in the host tier now                   */
  uint64_t kv_tier_disk_bytes; /* held in the disk tier now                   */
  uint64_t kv_tier_files_refused; /* disk tier files ignored: another model's */
                               /* or corrupt                                  */
  uint64_t kv_imports_refused; /* llm_kv_import calls that imported nothing   */
                               /* (refused stream, corrupt, mismatch)         */
  int32_t kv_tier_disk_on;     /* 1 while the disk tier works; 0 without one, */
                               /* or once an error turned it off              */
  int32_t reserved2;
  /* --- appended in 0.5 (issue 33: disaggregation, llm_ctx_params.kv_role) */
  uint64_t kv_xfer_pulls;      /* consumer: pulls that imported KV            */
  uint64_t kv_xfer_fallbacks;  /* consumer: pulls that failed (prompt computed)*/
  uint64_t kv_xfer_bytes;      /* consumer: bytes received                    */
  uint64_t kv_xfer_tokens;     /* consumer: prompt tokens imported            */
  double kv_xfer_seconds;      /* consumer: time spent pulling and importing  */
  uint64_t kv_xfer_served;     /* producer: transfers served in full          */
  uint64_t kv_xfer_bytes_served; /* producer: bytes sent                      */
  uint64_t kv_leases_expired;  /* producer: leases dropped unfetched          */
  uint64_t kv_lease_bytes;     /* producer: bytes held under leases now       */
  int32_t kv_leases_active;    /* producer: leases held now                   */
  int32_t kv_role;             /* the context's LLM_KV_ROLE_*                 */
  /* --- appended in 0.6 (issue 35: llm_ctx_params.n_cpu_moe) --- */
  int32_t moe_host_layers;     /* MoE layers whose experts are in host memory */
  int32_t moe_cache_slots;     /* experts the device expert cache holds       */
  uint64_t moe_cache_bytes;    /* the cache's device memory                   */
  uint64_t moe_host_bytes;     /* page-locked host memory of those experts    */
  uint64_t moe_cpu_steps;      /* layer-steps whose experts the CPU computed  */
  uint64_t moe_copy_steps;     /* layer-steps that copied experts to the      */
                               /* device cache and ran them there             */
  uint64_t moe_bytes_copied;   /* expert bytes copied host -> device          */
  uint64_t moe_cache_hits;     /* copy-way expert lookups found in the cache  */
  uint64_t moe_cache_misses;   /* ... and copied (bytes_copied's experts)     */
  uint64_t moe_tokens;         /* tokens through host layers (per layer-step):*/
                               /* bytes per token = bytes_copied / tokens     */
  uint64_t moe_prefetch_experts; /* experts prefetched (their bytes are in   */
                               /* moe_bytes_copied)                           */
  uint64_t moe_prefetch_used;  /* ... of them wanted by the layer predicted   */
  uint64_t moe_predicted_wanted; /* experts host layers wanted where a        */
                               /* prediction was made (accuracy's denominator)*/
  uint64_t moe_predicted_right; /* ... of them predicted: prefetch accuracy   */
                               /* = predicted_right / predicted_wanted        */
  /* --- appended in 0.7 (issue 36: images in the prompt, mmproj_path) --- */
  uint64_t images_encoded;     /* images run through the vision encoder       */
  uint64_t image_cache_hits;   /* images whose soft tokens came from the      */
                               /* image cache instead (the same pixels seen   */
                               /* before: no second encoding)                 */
  uint64_t image_tokens;       /* image positions in the prompts admitted so  */
                               /* far (encoded or from the cache)             */
  double image_encode_seconds; /* time spent encoding images (seconds per     */
                               /* image = this / images_encoded)              */
} llm_stats;

/* Engine-wide figures at this moment. The caller sets out->struct_size; the
 * library fills the fields that fit. Errors: NULL_ARGUMENT, STRUCT_SIZE. */
LLM_API llm_status llm_get_stats(llm_ctx* ctx, llm_stats* out);

/* One CUDA device's share of a context (appended in 0.6, issue 35): the  */
/* layers it runs and the memory it holds there.                          */
typedef struct llm_device_stats {
  uint32_t struct_size;
  int32_t device;              /* CUDA ordinal                                */
  int32_t first_layer;         /* runs layers [first_layer, end_layer)        */
  int32_t end_layer;
  int32_t n_devices;           /* devices the context uses (index range);    */
                               /* 0 for a context on the CPU backend          */
  int32_t reserved;
  uint64_t weight_bytes;       /* weights on this device                      */
  uint64_t kv_pool_bytes;      /* KV pool on this device                      */
  uint64_t used_bytes;         /* the device's memory in use now (everyone's) */
  uint64_t total_bytes;        /* the device's memory                         */
} llm_device_stats;

/* The index-th device (0-based, in layer order) the context's layers run  */
/* on. The caller sets out->struct_size. out->n_devices is filled whatever */
/* the index; an index outside [0, n_devices) returns NOT_FOUND with the   */
/* other fields 0 (so index 0 on a CPU context says n_devices 0). Errors:  */
/* NULL_ARGUMENT, STRUCT_SIZE, NOT_FOUND. Thread-safe like llm_get_stats.  */
LLM_API llm_status llm_get_device_stats(llm_ctx* ctx, int32_t index, llm_device_stats* out);

/* --------------------------------------------------------------- model */
typedef struct llm_model_info {
  uint32_t struct_size;   /* caller sets = sizeof(llm_model_info)          */
  int32_t n_vocab;
  int32_t n_ctx_train;    /* context length the model was trained with     */
  int32_t n_ctx;          /* context length this ctx serves                */
  int32_t n_embd;
  int32_t n_layer;
  int32_t n_head;
  int32_t n_head_kv;
  llm_token bos;          /* -1 if none                                    */
  llm_token eos;          /* -1 if none                                    */
  int64_t n_params;       /* parameters in the weights                     */
  const char* arch;       /* "llama" or "gemma3"; valid for the ctx lifetime */
  const char* name;       /* general.name or ""; same lifetime             */
} llm_model_info;

/* Errors: NULL_ARGUMENT, STRUCT_SIZE. */
LLM_API llm_status llm_model_get_info(llm_ctx* ctx, llm_model_info* out);

/* ----------------------------------------------------------- tokenizer */

/* Tokenizes text[0..text_len) with the model's tokenizer. flags: LLM_TOKENIZE_*.
 * Writes at most `capacity` ids to `out` and the full count to *n_out; if
 * the count exceeds capacity, returns LLM_ERR_BUFFER_TOO_SMALL (with *n_out
 * set to the count needed). out may be NULL when capacity is 0.
 * Errors: NULL_ARGUMENT, INVALID_UTF8, BUFFER_TOO_SMALL. */
LLM_API llm_status llm_tokenize(llm_ctx* ctx, const char* text, size_t text_len, uint32_t flags,
                                llm_token* out, int32_t capacity, int32_t* n_out);

/* Renders tokens as UTF-8 (byte-exact inverse of tokenization, apart from
 * the dummy-prefix space that STRIP_LEADING_SPACE removes). Writes at most
 * `capacity` bytes plus no NUL; *n_out gets the full byte count;
 * LLM_ERR_BUFFER_TOO_SMALL when it does not fit.
 * Errors: NULL_ARGUMENT, INVALID_ARGUMENT (token out of range),
 * BUFFER_TOO_SMALL. */
LLM_API llm_status llm_detokenize(llm_ctx* ctx, const llm_token* tokens, int32_t n_tokens,
                                  uint32_t flags, char* out, size_t capacity, size_t* n_out);

/* -------------------------------------------------------- chat templates */

/* One turn of a conversation. role: "system", "user", "assistant", "tool" or
 * whatever the template knows; content: the turn's text. Both NUL-terminated
 * UTF-8, borrowed for the duration of the call. */
typedef struct llm_chat_message {
  const char* role;
  const char* content;
} llm_chat_message;

/* Renders messages with the model's chat template (tmpl == NULL: the GGUF key
 * tokenizer.chat_template; for a model without that key whose architecture
 * has one fixed format, the library's copy of it — "gemma3": Gemma 3's
 * <start_of_turn> template) or with the given Jinja template text, the way
 * Hugging Face transformers' apply_chat_template does: the template sees
 * `messages` (a list of {role, content}), `add_generation_prompt`,
 * `bos_token` and `eos_token` (the texts of the model's special tokens;
 * undefined when the model has none), `tools` and `documents` (none), and
 * the functions raise_exception(msg) and strftime_now(format). The Jinja
 * subset supported is documented in src/chat/jinja_template.h.
 * add_generation_prompt: 1 appends the assistant-turn opener, 0 does not.
 * messages may be NULL when n_messages is 0.
 * Output like llm_detokenize: at most `capacity` bytes, no NUL; *n_out gets
 * the full byte count; LLM_ERR_BUFFER_TOO_SMALL when it does not fit.
 * The rendered text is a prompt: submit it with LLM_TOKENIZE_PARSE_SPECIAL
 * (and without ADD_SPECIAL when the template writes bos_token itself).
 * Thread-safe on one context.
 * Errors: NULL_ARGUMENT, INVALID_UTF8 (template or message text),
 * UNSUPPORTED (tmpl == NULL and the model has no template, neither its own
 * nor a built-in one for its architecture),
 * INVALID_ARGUMENT (add_generation_prompt not 0/1; a template syntax or
 * runtime error, with its message; a raise_exception in the template, whose
 * message is llm_last_error() verbatim), BUFFER_TOO_SMALL. */
LLM_API llm_status llm_chat_apply_template(llm_ctx* ctx, const char* tmpl, const llm_chat_message* messages,
                                           size_t n_messages, int32_t add_generation_prompt, char* out,
                                           size_t capacity, size_t* n_out);

/* llm_chat_apply_template for conversations with tools: the messages as a
 * JSON array of objects in OpenAI's / transformers' shape — "role" (a
 * string), "content" (a string, null, or a list of parts) and whatever else
 * a message carries ("tool_calls" of an assistant turn, with "arguments" an
 * object as transformers wants them, "tool_call_id" and "name" of a
 * role "tool" result, "reasoning_content"...) — reach the template as
 * Python's json.loads would give them; tools_json is a JSON array of tool
 * definitions ({"type": "function", "function": {"name", "description",
 * "parameters"}}), the template's `tools`, or NULL (tools = None). Both
 * NUL-terminated UTF-8, nested at most 32 levels. Everything else (template
 * choice, the other variables, output protocol) is as llm_chat_apply_template.
 * Errors: those of llm_chat_apply_template; INVALID_ARGUMENT also for JSON
 * that does not parse (the message names the byte offset), a message that is
 * not an object with a string "role", or tools_json that is not an array. */
LLM_API llm_status llm_chat_apply_template_json(llm_ctx* ctx, const char* tmpl, const char* messages_json,
                                                const char* tools_json, int32_t add_generation_prompt, char* out,
                                                size_t capacity, size_t* n_out);

/* llm_chat_apply_template_json with more template variables: vars_json is
 * a JSON object (NUL-terminated UTF-8, or NULL for none) whose members reach
 * the template as variables of those names, as a server's
 * chat_template_kwargs do ({"enable_thinking": false}) or a caller's
 * "date_string". They cannot name messages, tools, add_generation_prompt,
 * bos_token or eos_token (INVALID_ARGUMENT). Everything else is as
 * llm_chat_apply_template_json. */
LLM_API llm_status llm_chat_apply_template_vars(llm_ctx* ctx, const char* tmpl, const char* messages_json,
                                                const char* tools_json, const char* vars_json,
                                                int32_t add_generation_prompt, char* out, size_t capacity,
                                                size_t* n_out);

/* One turn of a conversation with pictures: role as in llm_chat_message,
 * its content as n_parts parts (text and images) in order. Unlike
 * llm_chat_message it starts with struct_size, so it can grow. */
typedef struct llm_chat_message_v2 {
  uint32_t struct_size;       /* = sizeof(llm_chat_message_v2)              */
  int32_t n_parts;            /* >= 0                                       */
  const char* role;           /* NUL-terminated UTF-8                       */
  const llm_content_part* parts; /* may be NULL when n_parts is 0          */
} llm_chat_message_v2;

/* llm_chat_apply_template for messages with pictures: each message's
 * content reaches the template as a list of OpenAI-style items,
 * {"type": "text", "text": ...} and {"type": "image"} (as transformers
 * gives a processor's template), so the model's own template writes its
 * image marker where each picture stands (Gemma 3: "<start_of_image>").
 * The image bytes are not read here (only the parts' kinds and text): the
 * rendered text is submitted as a text part followed by the same pictures,
 * in order, as image parts (llm_request.parts), and each marker takes its
 * picture. Everything else (template choice, output protocol, errors) is as
 * llm_chat_apply_template; also STRUCT_SIZE for a message or part whose
 * struct_size this library does not know, NULL_ARGUMENT for a NULL role or
 * text, INVALID_ARGUMENT for an unknown kind or n_parts < 0. */
LLM_API llm_status llm_chat_apply_template_v2(llm_ctx* ctx, const char* tmpl, const llm_chat_message_v2* messages,
                                              size_t n_messages, int32_t add_generation_prompt, char* out,
                                              size_t capacity, size_t* n_out);

/* ------------------------------------------------------------ tool calls */

enum { /* tool-call formats: llm_chat_tool_format, llm_chat_parse_tool_calls */
  LLM_TOOL_FORMAT_AUTO = 0,    /* parse: whichever marker below the text has   */
  LLM_TOOL_FORMAT_GENERIC = 1, /* the whole reply is JSON: {"tool_calls":      */
                               /* [call, ...]}, {"tool_call": call}, a call,   */
                               /* or a list of calls; {"response": "text"} is  */
                               /* content                                      */
  LLM_TOOL_FORMAT_HERMES = 2,  /* Qwen2.5, Qwen3, Hermes: one or more          */
                               /* <tool_call>call</tool_call>                  */
  LLM_TOOL_FORMAT_LLAMA3 = 3,  /* Llama 3.x JSON tool calling: a call, or      */
                               /* <|python_tag|> and ';'-separated calls       */
  LLM_TOOL_FORMAT_MISTRAL = 4  /* [TOOL_CALLS][call, ...] or (v11 and later)   */
                               /* [TOOL_CALLS]name[ARGS]{arguments}            */
};
/* A "call" above is a JSON object {"name": "...", "arguments": {...}}
 * ("parameters" is accepted for "arguments", as Llama 3 writes it; arguments
 * written as a string holding an object's JSON are parsed). */

/* The format the model's chat template writes tool calls in (tmpl == NULL:
 * the model's template, as llm_chat_apply_template finds it; else the given
 * template text): HERMES when the template has <tool_call>, MISTRAL when it
 * has [TOOL_CALLS], LLAMA3 for <|python_tag|> or a Llama 3 header template
 * that describes "parameters", else GENERIC (also for a model without a
 * template). Never AUTO. Thread-safe on one context.
 * Errors: NULL_ARGUMENT (ctx, out_format). */
LLM_API llm_status llm_chat_tool_format(llm_ctx* ctx, const char* tmpl, int32_t* out_format);

/* Splits a model's reply into the tool calls in it and the remaining text.
 * Needs no context: a pure function of the text, so it serves streamed text
 * too (call it on what has arrived; a call still being written is reported
 * as truncated, INVALID_ARGUMENT, until it is whole).
 * format: LLM_TOOL_FORMAT_*. text[0..text_len): UTF-8 (NULL only when
 * text_len is 0).
 * Writes compact JSON, at most `capacity` bytes and no NUL, *n_out = the full
 * byte count (BUFFER_TOO_SMALL when it does not fit, as llm_detokenize):
 *   {"content": "text outside the calls",
 *    "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}
 * with an "id" member in a call where the model wrote one (Mistral). Text
 * without a call gives {"content": text, "tool_calls": []}; with calls, the
 * content is trimmed of surrounding whitespace. Arguments are always a JSON
 * object (OpenAI's API wants them as a string: serialize it yourself).
 * Errors: NULL_ARGUMENT, INVALID_ARGUMENT (unknown format; a call's marker
 * followed by something that is not a well-formed call: truncated JSON, no
 * "name", arguments not an object, JSON nested over 64 levels — the message
 * names the byte offset), INVALID_UTF8, BUFFER_TOO_SMALL. */
LLM_API llm_status llm_chat_parse_tool_calls(int32_t format, const char* text, size_t text_len, char* out,
                                             size_t capacity, size_t* n_out);

/* ------------------------------------------------------------ KV state
 *
 * A context's prefix cache can leave it and come back: export the KV of a
 * token sequence the cache holds (e.g. a finished request's prompt + output
 * ids: its full blocks stay cached until evicted) as a versioned stream,
 * and import such a stream into the prefix cache of a context running the
 * same model (docs/KV_FORMAT.md). A later llm_submit whose prompt starts
 * with the imported tokens (and has the same cache_salt) reuses them; its
 * final event's metrics.cached_prompt_tokens shows it.
 *
 *  - Only full blocks are cached, so an export covers the longest cached
 *    prefix of `tokens` that is a whole number of blocks
 *    (llm_ctx_params.kv_block_size tokens each; 16 by default).
 *  - A stream carries a model fingerprint (architecture, every tensor's name,
 *    type and shape, a hash of sampled weight bytes) and the KV geometry;
 *    an import checks both before it reads a block, and checks each block's
 *    checksum and chained hash before it uses it. A stream of another
 *    element type (F32, F16, Q8_0, Q4_0: llm_ctx_params.kv_type, and V's
 *    kv_type_v when it differs; BF16, the CUDA pool's AUTO) converts, K and
 *    V each: a CPU context's stream imports into a CUDA context and back
 *    (Q4_0 moves as it is: both pools hold the same rotated blocks).
 *  - Threads: the engine waits between two steps while an export or import
 *    runs (requests keep queueing; their steps resume after), and the
 *    callbacks run on the calling thread. Concurrent calls on one context
 *    take turns. A callback may call any llm_* function on the context but
 *    llm_ctx_destroy and another llm_kv_* (INVALID_ARGUMENT).
 *  - The CPU and CUDA backends export and import; partial offload (a
 *    model split between them) answers LLM_ERR_UNSUPPORTED. */

/* Writes `size` bytes of the stream; returns 0, or nonzero to stop the
 * export (it then fails with LLM_ERR_IO). */
typedef int32_t (*llm_kv_write_fn)(void* user_data, const void* data, size_t size);
/* Reads up to `size` bytes into `buf` and sets *n_read; fewer than `size`
 * (0 included) only at the end of the stream. Returns 0, or nonzero for an
 * error (the import then fails with LLM_ERR_IO). */
typedef int32_t (*llm_kv_read_fn)(void* user_data, void* buf, size_t size, size_t* n_read);

/* Streams the cached KV of tokens[0..n_tokens) through `write`, block by
 * block (one block in memory at a time), as cached under `cache_salt`
 * (llm_request.cache_salt). *out_n_tokens = tokens exported: a multiple of
 * the block size, 0 when the cache holds no full block of them (a valid
 * stream without blocks is still written).
 * Errors: NULL_ARGUMENT (ctx, write, out_n_tokens; tokens when n_tokens >
 * 0), INVALID_ARGUMENT (n_tokens < 0; called from a KV callback), IO (the
 * callback said no; what it wrote is an incomplete stream, which an import
 * refuses), UNSUPPORTED (partial offload), SHUTDOWN. */
LLM_API llm_status llm_kv_export(llm_ctx* ctx, const llm_token* tokens, int32_t n_tokens, uint64_t cache_salt,
                                 llm_kv_write_fn write, void* user_data, int32_t* out_n_tokens);

/* Reads a stream through `read` into the prefix cache under `cache_salt`.
 * *out_n_tokens = how many leading tokens of the stream's sequence are now
 * reusable; it is set on LLM_OK and also on the errors below after the
 * header was accepted (the blocks verified before a bad one stay usable:
 * each was checked on its own). Blocks the cache already holds are reused,
 * not copied. An import never evicts a block a running sequence uses: when
 * the free (and evictable cached) blocks run out it stops there, returns
 * LLM_OK and imports the longest prefix that fits — *out_n_tokens is then
 * smaller than the stream's token count — leaving the rest of the stream
 * unread.
 * Errors: NULL_ARGUMENT (ctx, read, out_n_tokens), KV_MISMATCH (another
 * model, another KV geometry — layers, KV heads, head dim, block size,
 * sliding windows — or a newer format version; the message says what
 * differs), KV_CORRUPT (truncated, malformed, bad checksum; the message
 * names the byte offset), IO (the callback failed), INVALID_ARGUMENT (called
 * from a KV callback), UNSUPPORTED (partial offload), SHUTDOWN. The context
 * keeps serving after any of them. */
LLM_API llm_status llm_kv_import(llm_ctx* ctx, uint64_t cache_salt, llm_kv_read_fn read, void* user_data,
                                 int32_t* out_n_tokens);

/* llm_kv_export into the file `path` (written beside it under a temporary
 * name, then renamed over it: an existing file is replaced only by a
 * complete stream). Errors: those of llm_kv_export; IO when the file
 * cannot be written. */
LLM_API llm_status llm_kv_export_file(llm_ctx* ctx, const llm_token* tokens, int32_t n_tokens, uint64_t cache_salt,
                                      const char* path, int32_t* out_n_tokens);
/* llm_kv_import from the file `path`. Errors: those of llm_kv_import; IO
 * when the file cannot be opened or read. */
LLM_API llm_status llm_kv_import_file(llm_ctx* ctx, uint64_t cache_salt, const char* path, int32_t* out_n_tokens);


/* ------------------------------------------------ embeddings (0.4, issue 31)
 *
 * Besides LLM_TASK_EMBED requests through llm_submit / llm_poll, a blocking
 * call embeds a group of inputs and waits for all of them. */
typedef struct llm_embed_params {
  uint32_t struct_size;     /* = sizeof(llm_embed_params)                   */
  int32_t pooling;          /* LLM_POOLING_*; default MODEL. NONE (a vector */
                            /* per token) is refused here: use llm_submit   */
  int32_t normalize;        /* 1 (default): L2-normalised; 0: raw           */
  int32_t dimensions;       /* 0 (default) = all; else the first values     */
  int32_t truncate;         /* 1: inputs longer than n_ctx are cut; 0       */
                            /* (default): CONTEXT_OVERFLOW                  */
  uint32_t tokenize_flags;  /* texts: LLM_TOKENIZE_*; default ADD_SPECIAL   */
  int32_t priority;         /* as llm_request.priority; default 0           */
  int32_t reserved0;        /* must be 0                                    */
} llm_embed_params;

/* Fills *params with struct_size and defaults. */
LLM_API llm_status llm_embed_params_init(llm_embed_params* params);

/* Embeds n_inputs inputs and returns when all are done: the texts
 * texts[0..n_inputs) (UTF-8, NUL-terminated) when texts is not NULL, else the
 * token arrays tokens[i] of n_tokens[i] ids (used verbatim). On LLM_OK,
 * out holds (n_inputs, *out_dim) floats, input i in row i. The inputs run
 * through the context's engine as EMBED requests (batched with each other
 * and whatever else runs) but not through the event queue: the call neither
 * needs nor disturbs llm_poll. params NULL: defaults. Thread-safe like
 * llm_submit.
 * out_dim (required) receives the row length (the model's vector size, or
 * `dimensions`, or the classifier's outputs for RANK) even when out is too
 * small: then BUFFER_TOO_SMALL and nothing is run (out may be NULL with
 * out_capacity 0 to ask for it). out_capacity counts floats.
 * Errors: NULL_ARGUMENT (ctx, out_dim, tokens/n_tokens or an entry),
 * STRUCT_SIZE, INVALID_ARGUMENT (n_inputs < 1, an empty input, POOLING_NONE,
 * dimensions out of range), UNSUPPORTED (the model makes no embeddings; text
 * for a vocabulary whose tokenizer this build lacks), CONTEXT_OVERFLOW (an
 * input longer than n_ctx without truncate), INVALID_UTF8, BUFFER_TOO_SMALL,
 * SHUTDOWN, BACKEND. On any error the rows of out are unspecified; inputs
 * still queued are cancelled before the call returns. */
LLM_API llm_status llm_embed(llm_ctx* ctx, const char* const* texts, const llm_token* const* tokens,
                             const int32_t* n_tokens, int32_t n_inputs, const llm_embed_params* params, float* out,
                             size_t out_capacity, int32_t* out_dim);

/* Tokenizes a (query, document) pair as the model's reranker reads it, for
 * llm_embed with LLM_POOLING_RANK (0.4, issue 31): a file with a rerank
 * template (GGUF tokenizer.chat_template.rerank, as Qwen3-Reranker's
 * conversions carry) gets "{query}", then "{document}", replaced in it and
 * the result tokenized with special tokens parsed and none added; any other
 * (a cross-encoder) gets [BOS] query [EOS] [EOS] document [EOS], each of
 * BOS / EOS where the vocabulary has one (BERT: [CLS] q [SEP][SEP] d [SEP]).
 * query and document are NUL-terminated UTF-8. Output as llm_tokenize: at
 * most `capacity` ids to out, the full count to *n_out.
 * Errors: NULL_ARGUMENT, INVALID_ARGUMENT, INVALID_UTF8, BUFFER_TOO_SMALL. */
LLM_API llm_status llm_rerank_tokenize(llm_ctx* ctx, const char* query, const char* document, llm_token* out,
                                       int32_t capacity, int32_t* n_out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* LLM_H */
