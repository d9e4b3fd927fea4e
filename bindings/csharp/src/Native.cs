// P/Invoke mirror of include/llm.h. Field order and types follow the header
// one to one; Tests.cs checks sizes and offsets against the pinned ABI.
using System;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;

[assembly: InternalsVisibleTo("Llmrt.Tests")]

namespace Llmrt
{
    [StructLayout(LayoutKind.Sequential)]
    internal struct NativeCtxParams
    {
        public uint struct_size;
        public int backend;
        public IntPtr model_path;
        public int n_threads, n_ctx, kv_block_size, n_kv_blocks, max_seqs, max_batch_tokens, max_queued, preempt_mode;
        public IntPtr draft_model_path;
        public int self_draft_layers, spec_mode, spec_k, reserved1;
        public float gpu_memory_fraction;
        public int reserved2;
        public ulong swap_space_bytes;
        public int kv_type, kv_type_v, n_gpu_layers, reserved4;  // kv_type_v: 0.6 (issue 32), was reserved3
        public ulong kv_host_bytes;
        public IntPtr kv_disk_dir;
        public ulong kv_disk_bytes;
        public int kv_role, kv_lease_ms;
        public IntPtr kv_listen_addr;
        // appended in 0.6 (issue 35): MoE experts in host memory
        public int n_cpu_moe, moe_host_policy;
        public ulong moe_cache_bytes;
        public int moe_prefetch, reserved5;
        public int main_gpu;
        [MarshalAs(UnmanagedType.ByValArray, SizeConst = 16)] public float[] tensor_split;  // LLM_MAX_DEVICES
        // appended in 0.7 (issue 36): images in the prompt
        public int reserved6;
        public IntPtr mmproj_path;  // UTF-8 projector file path, or NULL
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct NativeSamplingParams
    {
        public uint struct_size;
        public float temperature;
        public int top_k;
        public float top_p, min_p, repetition_penalty, frequency_penalty, presence_penalty;
        public int penalty_last_n;
        public ulong seed;
        // appended in 0.2
        public IntPtr logit_bias; // llm_logit_bias[n_logit_bias]
        public int n_logit_bias, reserved1;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct NativeLogitBias
    {
        public int token;
        public float bias;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct NativeTopLogprob
    {
        public int token;
        public float logprob;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct NativeMetrics
    {
        public int prompt_tokens, cached_prompt_tokens, generated_tokens;
        public int draft_tokens_proposed, draft_tokens_accepted, preemptions;
        public double queue_ms, ttft_ms, tpot_ms, total_ms;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct NativeEvent
    {
        public uint struct_size;
        public int type;
        public ulong request_id;
        public int seq_index;
        public int token;
        public IntPtr text;
        public uint text_len;
        public float logprob;
        public int finish_reason;
        public int status;
        public IntPtr message;
        public NativeMetrics metrics;
        public IntPtr prompt_logprobs;
        public int n_prompt_logprobs;
        public int reserved0;
        // appended in 0.2
        public IntPtr top_logprobs; // llm_top_logprob[n_top_logprobs]
        public int n_top_logprobs, reserved1;
        // appended in 0.4: embeddings
        public IntPtr embedding;
        public int n_embedding, n_embedding_rows;
        // appended in 0.5: prefill/decode disaggregation (docs/DISAGG.md)
        public IntPtr kv_transfer_desc; // FINAL of a kv_produce request: the descriptor, or NULL
        public int transferred_prompt_tokens;
        public int kv_transfer_status;
        // appended in 0.6: reasoning output (issue 32)
        public IntPtr reasoning_text; // the thinking's share of text (reasoning_format), never NULL
        public uint reasoning_text_len;
        public int part;              // LLM_PART_*
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct NativeRequest
    {
        public uint struct_size;
        public uint tokenize_flags;
        public IntPtr prompt;
        public IntPtr prompt_tokens;
        public int n_prompt_tokens;
        public int max_tokens;
        public IntPtr sampling;
        public IntPtr stop;
        public int n_stop, ignore_eos, n, priority, prompt_logprobs, reserved0;
        public IntPtr callback;
        public IntPtr user_data;
        public ulong cache_salt; // appended in 0.1
        public int spec_mode, spec_k;
        // appended in 0.2
        public IntPtr stop_token_ids; // llm_token[n_stop_token_ids]
        public int n_stop_token_ids, min_tokens, top_logprobs, reserved1;
        // appended in 0.3: constrained decoding
        public int constraint_kind, n_choices;
        public IntPtr constraint; // UTF-8 schema / regex / grammar
        public IntPtr choices;    // const char*[n_choices]
        // appended in 0.4: embeddings, KV kept
        public int task, pooling, normalize, dimensions, truncate, reserved2;
        public int keep_kv, reserved3;
        // appended in 0.5: prefill/decode disaggregation (docs/DISAGG.md)
        public IntPtr kv_transfer_desc; // UTF-8 descriptor from a producer's final event
        public int kv_produce, reserved4;
        // appended in 0.6: reasoning output (issue 32)
        public int reasoning_format, reserved5; // LLM_REASONING_*
        // appended in 0.7: images in the prompt (issue 36)
        public IntPtr parts;  // llm_content_part[n_parts]
        public int n_parts, reserved6;
    }

    // appended in 0.7: images in the prompt (issue 36); kind is LLM_CONTENT_*
    [StructLayout(LayoutKind.Sequential)]
    internal struct NativeContentPart
    {
        public uint struct_size;
        public int kind;
        public IntPtr text;   // TEXT: UTF-8, NUL-terminated
        public IntPtr data;   // IMAGE, IMAGE_RGB: the bytes
        public UIntPtr n_data;
        public int width, height;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct NativeChatMessageV2
    {
        public uint struct_size;
        public int n_parts;
        public IntPtr role;   // UTF-8
        public IntPtr parts;  // llm_content_part[n_parts]
    }

    [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
    internal delegate void NativeEventCallback(IntPtr ev, IntPtr userData);

    // appended in 0.4: embeddings (issue 31)
    [StructLayout(LayoutKind.Sequential)]
    internal struct NativeEmbedParams
    {
        public uint struct_size;
        public int pooling, normalize, dimensions, truncate;
        public uint tokenize_flags;
        public int priority, reserved0;
    }

    internal static class Native
    {
        // Resolved as libllmrt.so: next to the assembly, then the loader's
        // path (LD_LIBRARY_PATH). See README.
        internal const string Lib = "llmrt";

        internal const int EventToken = 1, EventFinal = 2;
        internal const uint TokenizeAddSpecial = 1;
        internal const ulong SeedRandom = ulong.MaxValue;

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern IntPtr llm_version();
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern IntPtr llm_status_str(int status);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern IntPtr llm_last_error();
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int llm_ctx_params_init(IntPtr p);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int llm_sampling_params_init(IntPtr p);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int llm_content_part_init(IntPtr p);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int llm_request_init(IntPtr r);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int llm_ctx_create(ref NativeCtxParams p, out ContextHandle ctx);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern void llm_ctx_destroy(IntPtr ctx);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int llm_submit(ContextHandle ctx, ref NativeRequest r, out ulong id);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int llm_cancel(ContextHandle ctx, ulong id);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int llm_poll(ContextHandle ctx, IntPtr events, uint capacity, out uint n, int timeoutMs);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int llm_wakeup(ContextHandle ctx);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int llm_chat_parse_tool_calls(int format, byte[] text, UIntPtr textLen, byte[] output, UIntPtr capacity, out UIntPtr n);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int llm_chat_tool_format(ContextHandle ctx, IntPtr tmpl, out int format);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int llm_kv_export_file(ContextHandle ctx, int[] tokens, int n_tokens, ulong cache_salt, byte[] path, out int n);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int llm_kv_import_file(ContextHandle ctx, ulong cache_salt, byte[] path, out int n);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int llm_embed_params_init(IntPtr p);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int llm_embed(ContextHandle ctx, IntPtr texts, IntPtr tokens, int[] n_tokens, int n_inputs,
                                             ref NativeEmbedParams p, float[] output, UIntPtr capacity, out int dim);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int llm_rerank_tokenize(ContextHandle ctx, byte[] query, byte[] document, int[] output, int capacity, out int n);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int llm_tokenize(ContextHandle ctx, byte[] text, UIntPtr len, uint flags, int[] output, int capacity, out int n);

        internal static string Utf8(IntPtr p, int len)
        {
            if (p == IntPtr.Zero || len <= 0) return "";
            var bytes = new byte[len];
            Marshal.Copy(p, bytes, 0, len);
            return System.Text.Encoding.UTF8.GetString(bytes);
        }

        internal static string Utf8(IntPtr p)
        {
            if (p == IntPtr.Zero) return "";
            int len = 0;
            while (Marshal.ReadByte(p, len) != 0) len++;
            return Utf8(p, len);
        }

        /// A NUL-terminated UTF-8 copy of s in unmanaged memory (FreeHGlobal it).
        internal static IntPtr AllocUtf8(string s)
        {
            var bytes = System.Text.Encoding.UTF8.GetBytes(s);
            IntPtr p = Marshal.AllocHGlobal(bytes.Length + 1);
            Marshal.Copy(bytes, 0, p, bytes.Length);
            Marshal.WriteByte(p, bytes.Length, 0);
            return p;
        }

        /// Runs an llm_*_init function. It writes the struct as the loaded
        /// library knows it, which may be larger than this mirror (a newer
        /// library), so it writes into a roomy buffer; struct_size is then set
        /// to the mirror's size, which newer libraries accept.
        internal static T Init<T>(Func<IntPtr, int> init) where T : struct
        {
            IntPtr buf = Marshal.AllocHGlobal(2048);
            try
            {
                for (int i = 0; i < 2048; i += 8) Marshal.WriteInt64(buf, i, 0);
                init(buf);
                Marshal.WriteInt32(buf, 0, Marshal.SizeOf(typeof(T)));
                return (T)Marshal.PtrToStructure(buf, typeof(T));
            }
            finally { Marshal.FreeHGlobal(buf); }
        }
    }
}
