// Safe .NET API over llmrt. One pump thread per context calls llm_poll; the
// library runs the (static, never collected) native callback there, and the
// callback routes each event by its user_data key to the queue of its
// request. Consumers read their own queue on their own thread, so any number
// of threads can stream from one context.
using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Runtime.InteropServices;
using System.Text;
using System.Threading;
using Microsoft.Win32.SafeHandles;

namespace Llmrt
{
    /// <summary>Library status codes (LLM_ERR_*).</summary>
    public enum LlmStatus
    {
        Ok = 0, InvalidArgument = 1, NullArgument = 2, StructSize = 3, Io = 4, ModelFormat = 5,
        Unsupported = 6, OutOfMemory = 7, Busy = 8, NotFound = 9, ContextOverflow = 10,
        InvalidUtf8 = 11, BufferTooSmall = 12, Backend = 13, Shutdown = 14, Internal = 15,
        KvMismatch = 16, KvCorrupt = 17
    }

    /// <summary>A failed call: the status and the library's message.</summary>
    public sealed class LlmException : Exception
    {
        public LlmStatus Status { get; private set; }
        public string NativeMessage { get; private set; }

        public LlmException(LlmStatus status, string message)
            : base(Native.Utf8(Native.llm_status_str((int)status)) + (message.Length > 0 ? ": " + message : ""))
        {
            Status = status;
            NativeMessage = message;
        }

        /// Reads llm_last_error on this thread (right after the failing call).
        internal static LlmException Last(int status)
        {
            return new LlmException((LlmStatus)status, Native.Utf8(Native.llm_last_error()));
        }

        internal static void Check(int status)
        {
            if (status != 0) throw Last(status);
        }
    }

    /// <summary>Owns an llm_ctx; releasing it calls llm_ctx_destroy.</summary>
    internal sealed class ContextHandle : SafeHandleZeroOrMinusOneIsInvalid
    {
        public ContextHandle() : base(true) { }

        protected override bool ReleaseHandle()
        {
            Native.llm_ctx_destroy(handle);
            return true;
        }
    }

    /// <summary>Unmanaged memory from AllocHGlobal, freed on release.</summary>
    internal sealed class HGlobalBuffer : SafeHandleZeroOrMinusOneIsInvalid
    {
        public HGlobalBuffer(IntPtr p) : base(true) { SetHandle(p); }

        public static HGlobalBuffer Alloc(int bytes) { return new HGlobalBuffer(Marshal.AllocHGlobal(Math.Max(bytes, 1))); }

        public static HGlobalBuffer Utf8(string s) { return new HGlobalBuffer(Native.AllocUtf8(s)); }

        protected override bool ReleaseHandle()
        {
            Marshal.FreeHGlobal(handle);
            return true;
        }
    }

    public enum Backend { Auto = 0, Cpu = 1, Cuda = 2 }

    /// <summary>Context settings; 0 means the library default. A null
    /// ModelPath is the model built into the library.</summary>
    public sealed class ContextOptions
    {
        public string ModelPath;
        public Backend Backend = Backend.Auto;
        public int Threads, ContextLength, KvBlockSize, KvBlocks, MaxSeqs, MaxBatchTokens, MaxQueued;
        /// <summary>KV cache element types (LLM_KV_*: 0 auto, 1 f32, 2 f16, 3 q8_0, 4 q4_0):
        /// KvType for K (and V), KvTypeV for V when it differs (llm_ctx_params.kv_type_v; 0: as
        /// KvType; CPU and CUDA).</summary>
        public int KvType, KvTypeV;
        /// <summary>CUDA, Mixture of Experts: the experts of the first N MoE layers (-1: all) in host
        /// memory (llm_ctx_params.n_cpu_moe), served through a device expert cache of MoeCacheBytes
        /// (0: one layer's experts).</summary>
        public int CpuMoeLayers;
        public ulong MoeCacheBytes;
        // Several GPUs: MainGpu -1 splits the layers over every device, N
        // runs them on device N alone; TensorSplit gives each device's share
        // (null or all 0: in proportion to free memory; at most 16 entries).
        public int MainGpu = -1;
        public float[] TensorSplit;
        /// <summary>Layers on the GPU (llm_ctx_params.n_gpu_layers): a count, GpuLayersAll (the
        /// default) or GpuLayersAuto (as many as fit the devices' free memory; MoE experts to host
        /// memory first, the CPU when none fits). The CPU backend ignores it.</summary>
        public int GpuLayers = GpuLayersAll;
        /// <summary>Projector file for pictures in prompts (llama.cpp's --mmproj;
        /// llm_ctx_params.mmproj_path); null: text only.</summary>
        public string MmprojPath;
        public const int GpuLayersAll = -1;   // LLM_GPU_LAYERS_ALL
        public const int GpuLayersAuto = -2;  // LLM_GPU_LAYERS_AUTO
        public const int KvFp8E4m3 = 5;       // LLM_KV_FP8_E4M3 (CUDA sm_89+ only)
    }

    public sealed class SamplingOptions
    {
        public float Temperature, TopP, MinP, RepetitionPenalty, FrequencyPenalty, PresencePenalty;
        public int TopK, PenaltyLastN;
        /// <summary>null draws a random seed.</summary>
        public ulong? Seed;
        /// <summary>Token id -> bias added to its logit at every step: in
        /// [-100, 100], or float.NegativeInfinity (never sampled).</summary>
        public Dictionary<int, float> LogitBias = new Dictionary<int, float>();

        /// <summary>The library's defaults.</summary>
        public SamplingOptions()
        {
            var p = Native.Init<NativeSamplingParams>(Native.llm_sampling_params_init);
            Temperature = p.temperature; TopK = p.top_k; TopP = p.top_p; MinP = p.min_p;
            RepetitionPenalty = p.repetition_penalty; FrequencyPenalty = p.frequency_penalty;
            PresencePenalty = p.presence_penalty; PenaltyLastN = p.penalty_last_n;
            Seed = p.seed == Native.SeedRandom ? (ulong?)null : p.seed;
        }

        /// <summary>Always the most likely token.</summary>
        public static SamplingOptions Greedy() { return new SamplingOptions { Temperature = 0f }; }

        internal NativeSamplingParams ToNative()
        {
            var p = Native.Init<NativeSamplingParams>(Native.llm_sampling_params_init);
            p.temperature = Temperature; p.top_k = TopK; p.top_p = TopP; p.min_p = MinP;
            p.repetition_penalty = RepetitionPenalty; p.frequency_penalty = FrequencyPenalty;
            p.presence_penalty = PresencePenalty; p.penalty_last_n = PenaltyLastN;
            p.seed = Seed.HasValue ? Seed.Value : Native.SeedRandom;
            return p;
        }
    }

    /// <summary>One part of GenerateRequest.Parts (llm_content_part): text, an
    /// encoded picture (PNG, JPEG or WebP: the library sniffs the format) or
    /// Width x Height 8-bit RGB pixels, row after row.</summary>
    public sealed class ContentPart
    {
        public ContentKind Kind;
        public string Text;
        public byte[] Data;
        public int Width, Height;

        public static ContentPart FromText(string text) { return new ContentPart { Kind = ContentKind.Text, Text = text }; }
        public static ContentPart FromImage(byte[] encoded) { return new ContentPart { Kind = ContentKind.Image, Data = encoded }; }
        public static ContentPart FromRgb(byte[] pixels, int width, int height)
        {
            return new ContentPart { Kind = ContentKind.ImageRgb, Data = pixels, Width = width, Height = height };
        }
    }

    /// <summary>llm_content_part.kind (LLM_CONTENT_*).</summary>
    public enum ContentKind { Text = 0, Image = 1, ImageRgb = 2 }

    public sealed class GenerateRequest
    {
        /// <summary>Text prompt (BOS added as the model says).</summary>
        public string Prompt;
        /// <summary>Token ids used verbatim when Prompt is null.</summary>
        public int[] PromptTokens;
        /// <summary>The prompt as text and pictures in order (llm_request.parts),
        /// when Prompt and PromptTokens are null; pictures need
        /// ContextOptions.MmprojPath.</summary>
        public ContentPart[] Parts;
        public int MaxTokens = 256;
        public SamplingOptions Sampling;
        public string[] Stop;
        public bool IgnoreEos;
        public int N = 1;
        public int Priority;
        /// <summary>Token ids that end a sequence like EOS (even with IgnoreEos).</summary>
        public int[] StopTokenIds;
        /// <summary>EOS and StopTokenIds are masked until this many tokens exist.</summary>
        public int MinTokens;
        /// <summary>0..20 alternatives in each token event's TopLogprobs.</summary>
        public int TopLogprobs;
        /// <summary>What the output must match; Constraint holds the schema,
        /// regex or grammar text, Choices the strings of a Choice.</summary>
        public ConstraintKind ConstraintKind;
        public string Constraint;
        public string[] Choices;

        public GenerateRequest() { }
        public GenerateRequest(string prompt) { Prompt = prompt; }
    }

    public enum FinishReason { None = 0, Stop = 1, Length = 2, Cancelled = 3, Error = 4 }

    public struct Metrics
    {
        public int PromptTokens, CachedPromptTokens, GeneratedTokens;
        public double QueueMs, TtftMs, TpotMs, TotalMs;
    }

    /// <summary>A generated token, or (IsFinal) the end of a sequence, whose
    /// Text is any held-back remainder. Text is whole UTF-8.</summary>
    public sealed class LlmEvent : EventArgs
    {
        public ulong RequestId { get; internal set; }
        public int Seq { get; internal set; }
        public int Token { get; internal set; }
        public string Text { get; internal set; }
        public float Logprob { get; internal set; }
        public bool IsFinal { get; internal set; }
        public FinishReason Finish { get; internal set; }
        public Metrics Metrics { get; internal set; }
        /// <summary>Token events of a request with TopLogprobs = k: the k most
        /// likely (token, logprob) at this position, most likely first; else empty.</summary>
        public KeyValuePair<int, float>[] TopLogprobs { get; internal set; }
        internal LlmException Error;
    }

    public sealed class Completion
    {
        public string Text = "";
        public List<int> Tokens = new List<int>();
        public FinishReason Finish;
        public Metrics Metrics;
    }

    /// <summary>A loaded model and its engine. Thread-safe; Dispose must not
    /// race other calls.</summary>
    public sealed partial class LlmContext : IDisposable
    {
        // The one callback handed to C. A static field keeps the delegate (and
        // so its native thunk) alive for the life of the process, so C can
        // never call into a collected delegate.
        static readonly NativeEventCallback s_callback = OnNativeEvent;
        static readonly IntPtr s_callbackPtr = Marshal.GetFunctionPointerForDelegate(s_callback);
        static readonly ConcurrentDictionary<long, RequestStream> s_routes = new ConcurrentDictionary<long, RequestStream>();
        static long s_nextKey;

        readonly ContextHandle _handle;
        readonly Thread _pump;
        volatile bool _stopping;
        int _disposed;
        readonly ConcurrentDictionary<long, RequestStream> _mine = new ConcurrentDictionary<long, RequestStream>();

        public LlmContext(ContextOptions options = null)
        {
            options = options ?? new ContextOptions();
            var p = Native.Init<NativeCtxParams>(Native.llm_ctx_params_init);
            using (var path = options.ModelPath != null ? HGlobalBuffer.Utf8(options.ModelPath) : null)
            using (var mmproj = options.MmprojPath != null ? HGlobalBuffer.Utf8(options.MmprojPath) : null)
            {
                p.model_path = path != null ? path.DangerousGetHandle() : IntPtr.Zero;
                p.mmproj_path = mmproj != null ? mmproj.DangerousGetHandle() : IntPtr.Zero;
                p.backend = (int)options.Backend;
                p.n_threads = options.Threads; p.n_ctx = options.ContextLength;
                p.kv_block_size = options.KvBlockSize; p.n_kv_blocks = options.KvBlocks;
                p.max_seqs = options.MaxSeqs; p.max_batch_tokens = options.MaxBatchTokens;
                p.max_queued = options.MaxQueued;
                p.kv_type = options.KvType; p.kv_type_v = options.KvTypeV;
                p.n_cpu_moe = options.CpuMoeLayers; p.moe_cache_bytes = options.MoeCacheBytes;
                p.main_gpu = options.MainGpu;
                p.n_gpu_layers = options.GpuLayers;
                if (options.TensorSplit != null)
                {
                    if (options.TensorSplit.Length > 16)
                        throw new ArgumentException("TensorSplit has more than 16 entries (LLM_MAX_DEVICES)");
                    Array.Copy(options.TensorSplit, p.tensor_split, options.TensorSplit.Length);
                }
                ContextHandle h;
                int st = Native.llm_ctx_create(ref p, out h);
                if (st != 0)
                {
                    var e = LlmException.Last(st);
                    if (h != null) h.SetHandleAsInvalid();
                    throw e;
                }
                _handle = h;
            }
            _pump = new Thread(Pump) { IsBackground = true, Name = "llmrt-pump" };
            _pump.Start();
        }

        void Pump()
        {
            while (!_stopping)
            {
                uint n;
                Native.llm_poll(_handle, IntPtr.Zero, 0, out n, -1); // callbacks only
            }
        }

        // Runs inside llm_poll on the pump thread. Nothing may escape into C.
        static void OnNativeEvent(IntPtr evp, IntPtr userData)
        {
            try
            {
                var ev = (NativeEvent)Marshal.PtrToStructure(evp, typeof(NativeEvent));
                RequestStream s;
                if (!s_routes.TryGetValue(userData.ToInt64(), out s)) return;
                var e = new LlmEvent
                {
                    RequestId = ev.request_id, Seq = ev.seq_index, Token = ev.token,
                    Text = Native.Utf8(ev.text, (int)ev.text_len), Logprob = ev.logprob,
                    IsFinal = ev.type == Native.EventFinal, Finish = (FinishReason)ev.finish_reason,
                };
                int nTop = ev.top_logprobs == IntPtr.Zero ? 0 : Math.Max(0, ev.n_top_logprobs);
                e.TopLogprobs = new KeyValuePair<int, float>[nTop];
                int topSize = Marshal.SizeOf(typeof(NativeTopLogprob));
                for (int i = 0; i < nTop; i++)
                {
                    var t = (NativeTopLogprob)Marshal.PtrToStructure(new IntPtr(ev.top_logprobs.ToInt64() + i * topSize), typeof(NativeTopLogprob));
                    e.TopLogprobs[i] = new KeyValuePair<int, float>(t.token, t.logprob);
                }
                if (e.IsFinal)
                {
                    var m = ev.metrics;
                    e.Metrics = new Metrics
                    {
                        PromptTokens = m.prompt_tokens, CachedPromptTokens = m.cached_prompt_tokens,
                        GeneratedTokens = m.generated_tokens, QueueMs = m.queue_ms, TtftMs = m.ttft_ms,
                        TpotMs = m.tpot_ms, TotalMs = m.total_ms,
                    };
                    if (e.Finish == FinishReason.Error)
                        e.Error = new LlmException((LlmStatus)ev.status, Native.Utf8(ev.message));
                }
                s.Deliver(e);
            }
            catch (Exception)
            {
                // Swallowed: an exception must never unwind through llm_poll.
            }
        }

        internal void Unroute(RequestStream s)
        {
            RequestStream ignored;
            s_routes.TryRemove(s.Key, out ignored);
            _mine.TryRemove(s.Key, out ignored);
        }

        /// <summary>Queues a request and returns its stream at once. Cancelling
        /// ct cancels the request (the stream then ends with FinishReason.Cancelled).</summary>
        public RequestStream Submit(GenerateRequest request, CancellationToken ct = default(CancellationToken))
        {
            if (request == null) throw new ArgumentNullException("request");
            if (_disposed != 0) throw new ObjectDisposedException("LlmContext");
            var buffers = new List<HGlobalBuffer>();
            try
            {
                var r = Native.Init<NativeRequest>(Native.llm_request_init);
                if (request.Prompt != null)
                {
                    if (request.Prompt.IndexOf('\0') >= 0) throw new LlmException(LlmStatus.InvalidArgument, "prompt contains a NUL character");
                    var b = HGlobalBuffer.Utf8(request.Prompt); buffers.Add(b);
                    r.prompt = b.DangerousGetHandle();
                }
                else if (request.PromptTokens != null && request.PromptTokens.Length > 0)
                {
                    var b = HGlobalBuffer.Alloc(4 * request.PromptTokens.Length); buffers.Add(b);
                    Marshal.Copy(request.PromptTokens, 0, b.DangerousGetHandle(), request.PromptTokens.Length);
                    r.prompt_tokens = b.DangerousGetHandle();
                    r.n_prompt_tokens = request.PromptTokens.Length;
                }
                else if (request.Parts != null && request.Parts.Length > 0)
                {
                    r.parts = NativeParts(request.Parts, buffers);
                    r.n_parts = request.Parts.Length;
                }
                r.max_tokens = request.MaxTokens;
                r.n = request.N;
                r.priority = request.Priority;
                r.ignore_eos = request.IgnoreEos ? 1 : 0;
                if (request.Sampling != null)
                {
                    var sp = request.Sampling.ToNative();
                    var bias = request.Sampling.LogitBias;
                    if (bias != null && bias.Count > 0)
                    {
                        int size = Marshal.SizeOf(typeof(NativeLogitBias));
                        var arr = HGlobalBuffer.Alloc(size * bias.Count); buffers.Add(arr);
                        int i = 0;
                        foreach (var kv in bias)
                        {
                            var nb = new NativeLogitBias { token = kv.Key, bias = kv.Value };
                            Marshal.StructureToPtr(nb, new IntPtr(arr.DangerousGetHandle().ToInt64() + i * size), false);
                            i++;
                        }
                        sp.logit_bias = arr.DangerousGetHandle();
                        sp.n_logit_bias = bias.Count;
                    }
                    var b = HGlobalBuffer.Alloc(Marshal.SizeOf(typeof(NativeSamplingParams))); buffers.Add(b);
                    Marshal.StructureToPtr(sp, b.DangerousGetHandle(), false);
                    r.sampling = b.DangerousGetHandle();
                }
                if (request.Stop != null && request.Stop.Length > 0)
                {
                    var arr = HGlobalBuffer.Alloc(IntPtr.Size * request.Stop.Length); buffers.Add(arr);
                    for (int i = 0; i < request.Stop.Length; i++)
                    {
                        var b = HGlobalBuffer.Utf8(request.Stop[i]); buffers.Add(b);
                        Marshal.WriteIntPtr(arr.DangerousGetHandle(), i * IntPtr.Size, b.DangerousGetHandle());
                    }
                    r.stop = arr.DangerousGetHandle();
                    r.n_stop = request.Stop.Length;
                }
                if (request.StopTokenIds != null && request.StopTokenIds.Length > 0)
                {
                    var b = HGlobalBuffer.Alloc(4 * request.StopTokenIds.Length); buffers.Add(b);
                    Marshal.Copy(request.StopTokenIds, 0, b.DangerousGetHandle(), request.StopTokenIds.Length);
                    r.stop_token_ids = b.DangerousGetHandle();
                    r.n_stop_token_ids = request.StopTokenIds.Length;
                }
                r.min_tokens = request.MinTokens;
                r.top_logprobs = request.TopLogprobs;
                r.constraint_kind = (int)request.ConstraintKind;
                if (request.Constraint != null)
                {
                    if (request.Constraint.IndexOf('\0') >= 0) throw new LlmException(LlmStatus.InvalidArgument, "constraint contains a NUL character");
                    var b = HGlobalBuffer.Utf8(request.Constraint); buffers.Add(b);
                    r.constraint = b.DangerousGetHandle();
                }
                if (request.Choices != null && request.Choices.Length > 0)
                {
                    var arr = HGlobalBuffer.Alloc(IntPtr.Size * request.Choices.Length); buffers.Add(arr);
                    for (int i = 0; i < request.Choices.Length; i++)
                    {
                        if (request.Choices[i].IndexOf('\0') >= 0) throw new LlmException(LlmStatus.InvalidArgument, "choice contains a NUL character");
                        var b = HGlobalBuffer.Utf8(request.Choices[i]); buffers.Add(b);
                        Marshal.WriteIntPtr(arr.DangerousGetHandle(), i * IntPtr.Size, b.DangerousGetHandle());
                    }
                    r.choices = arr.DangerousGetHandle();
                    r.n_choices = request.Choices.Length;
                }
                long key = Interlocked.Increment(ref s_nextKey);
                var stream = new RequestStream(this, key, Math.Max(1, request.N));
                r.callback = s_callbackPtr;
                r.user_data = new IntPtr(key);
                // Routed before submit: the pump may deliver the first event
                // before llm_submit returns here.
                s_routes[key] = stream;
                _mine[key] = stream;
                ulong id;
                int st = Native.llm_submit(_handle, ref r, out id);
                if (st != 0)
                {
                    var e = LlmException.Last(st);
                    Unroute(stream);
                    throw e;
                }
                stream.Id = id;
                if (ct.CanBeCanceled) stream.Link(ct);
                return stream;
            }
            finally
            {
                foreach (var b in buffers) b.Dispose();
            }
        }

        // An llm_content_part array for parts in unmanaged memory (added to
        // buffers, freed after llm_submit, which copies everything).
        static IntPtr NativeParts(ContentPart[] parts, List<HGlobalBuffer> buffers)
        {
            int size = Marshal.SizeOf(typeof(NativeContentPart));
            var arr = HGlobalBuffer.Alloc(size * parts.Length); buffers.Add(arr);
            for (int i = 0; i < parts.Length; i++)
            {
                var part = parts[i];
                if (part == null) throw new ArgumentNullException("parts[" + i + "]");
                var np = Native.Init<NativeContentPart>(Native.llm_content_part_init);
                np.kind = (int)part.Kind;
                if (part.Kind == ContentKind.Text)
                {
                    string text = part.Text ?? "";
                    if (text.IndexOf('\0') >= 0) throw new LlmException(LlmStatus.InvalidArgument, "a text part contains a NUL character");
                    var b = HGlobalBuffer.Utf8(text); buffers.Add(b);
                    np.text = b.DangerousGetHandle();
                }
                else if (part.Data != null && part.Data.Length > 0)
                {
                    var b = HGlobalBuffer.Alloc(part.Data.Length); buffers.Add(b);
                    Marshal.Copy(part.Data, 0, b.DangerousGetHandle(), part.Data.Length);
                    np.data = b.DangerousGetHandle();
                    np.n_data = new UIntPtr((ulong)part.Data.Length);
                }
                np.width = part.Width; np.height = part.Height;
                Marshal.StructureToPtr(np, new IntPtr(arr.DangerousGetHandle().ToInt64() + i * size), false);
            }
            return arr.DangerousGetHandle();
        }

        /// <summary>Streams the text of a request as it is generated.</summary>
        public IEnumerable<string> Stream(GenerateRequest request, CancellationToken ct = default(CancellationToken))
        {
            return Submit(request, ct).TextPieces();
        }

        /// <summary>Generates, calling onEvent (on this thread) for every event.
        /// Throws OperationCanceledException if ct cancelled the request, and
        /// LlmException if the engine failed it.</summary>
        public Completion Generate(GenerateRequest request, Action<LlmEvent> onEvent = null,
                                   CancellationToken ct = default(CancellationToken))
        {
            using (var s = Submit(request, ct))
            {
                var c = new Completion();
                var text = new StringBuilder();
                foreach (var e in s)
                {
                    if (e.Seq == 0)
                    {
                        text.Append(e.Text);
                        if (e.IsFinal) { c.Finish = e.Finish; c.Metrics = e.Metrics; }
                        else c.Tokens.Add(e.Token);
                    }
                    if (onEvent != null) onEvent(e);
                }
                c.Text = text.ToString();
                if (c.Finish == FinishReason.Cancelled && ct.IsCancellationRequested)
                    throw new OperationCanceledException(ct);
                return c;
            }
        }

        internal void Cancel(ulong id)
        {
            if (_disposed != 0 || id == 0) return;
            try { Native.llm_cancel(_handle, id); }
            catch (ObjectDisposedException) { }
        }

        /// <summary>Saves the KV of the cached prefix of <paramref name="tokens"/> (a finished
        /// request's prompt + output) to the file <paramref name="path"/> (llm_kv_export_file:
        /// written beside it and renamed); returns the tokens saved, whole KV blocks.</summary>
        public int ExportKvFile(int[] tokens, ulong cacheSalt, string path)
        {
            if (tokens == null) throw new ArgumentNullException("tokens");
            int n;
            LlmException.Check(Native.llm_kv_export_file(_handle, tokens, tokens.Length, cacheSalt, CPath(path), out n));
            return n;
        }

        /// <summary>Loads a file written by ExportKvFile into the prefix cache (llm_kv_import_file);
        /// returns how many tokens a request starting with them now reuses. Another model's or
        /// geometry's file throws with LlmStatus.KvMismatch, a damaged one KvCorrupt.</summary>
        public int ImportKvFile(ulong cacheSalt, string path)
        {
            int n;
            LlmException.Check(Native.llm_kv_import_file(_handle, cacheSalt, CPath(path), out n));
            return n;
        }

        static byte[] CPath(string path)
        {
            if (path == null) throw new ArgumentNullException("path");
            var b = Encoding.UTF8.GetBytes(path);
            Array.Resize(ref b, b.Length + 1);  // NUL-terminated
            return b;
        }

        public int[] Tokenize(string text, bool addSpecial = true)
        {
            var bytes = Encoding.UTF8.GetBytes(text);
            var output = new int[bytes.Length + 8];
            int n;
            int st = Native.llm_tokenize(_handle, bytes, new UIntPtr((uint)bytes.Length),
                                         addSpecial ? Native.TokenizeAddSpecial : 0, output, output.Length, out n);
            if (st == (int)LlmStatus.BufferTooSmall)
            {
                output = new int[n];
                st = Native.llm_tokenize(_handle, bytes, new UIntPtr((uint)bytes.Length),
                                         addSpecial ? Native.TokenizeAddSpecial : 0, output, output.Length, out n);
            }
            LlmException.Check(st);
            Array.Resize(ref output, n);
            return output;
        }

        /// <summary>The format the model's chat template writes tool calls in.</summary>
        public ToolFormat ToolFormat()
        {
            int f;
            LlmException.Check(Native.llm_chat_tool_format(_handle, IntPtr.Zero, out f));
            return (ToolFormat)f;
        }

        public static string Version { get { return Native.Utf8(Native.llm_version()); } }

        /// <summary>Stops the pump, frees the model; open streams end with
        /// LlmException(Shutdown).</summary>
        public void Dispose()
        {
            if (Interlocked.Exchange(ref _disposed, 1) != 0) return;
            _stopping = true;
            Native.llm_wakeup(_handle);
            _pump.Join();
            _handle.Dispose();
            foreach (var s in _mine.Values)
            {
                Unroute(s);
                s.Fail(new LlmException(LlmStatus.Shutdown, "the context was disposed"));
            }
        }
    }

    /// <summary>One submitted request: enumerate it for its events (the
    /// enumeration ends after the last sequence's final event), or read
    /// TextPieces(). Dispose before the end cancels the request.</summary>
    public sealed class RequestStream : IEnumerable<LlmEvent>, IDisposable
    {
        readonly LlmContext _ctx;
        readonly BlockingCollection<LlmEvent> _queue = new BlockingCollection<LlmEvent>();
        int _finalsLeft;       // pump thread only
        int _consumed;         // set when enumeration ended
        CancellationTokenRegistration _reg;
        internal readonly long Key;

        public ulong Id { get; internal set; }

        internal RequestStream(LlmContext ctx, long key, int n)
        {
            _ctx = ctx;
            Key = key;
            _finalsLeft = n;
        }

        internal void Link(CancellationToken ct) { _reg = ct.Register(Cancel); }

        internal void Deliver(LlmEvent e)
        {
            _queue.Add(e);
            if (e.IsFinal && --_finalsLeft == 0)
            {
                _ctx.Unroute(this);
                _queue.CompleteAdding();
            }
        }

        internal void Fail(LlmException e)
        {
            try
            {
                _queue.Add(new LlmEvent { RequestId = Id, IsFinal = true, Finish = FinishReason.Error, Text = "", Error = e });
                _queue.CompleteAdding();
            }
            catch (InvalidOperationException) { } // already complete
        }

        /// <summary>Asks the engine to stop this request at the next step.</summary>
        public void Cancel() { _ctx.Cancel(Id); }

        public IEnumerator<LlmEvent> GetEnumerator()
        {
            foreach (var e in _queue.GetConsumingEnumerable())
            {
                if (e.Error != null) throw e.Error;
                yield return e;
            }
            _consumed = 1;
        }

        System.Collections.IEnumerator System.Collections.IEnumerable.GetEnumerator() { return GetEnumerator(); }

        /// <summary>The generated text, piece by piece (all sequences).</summary>
        public IEnumerable<string> TextPieces()
        {
            try
            {
                foreach (var e in this)
                    if (e.Text.Length > 0) yield return e.Text;
            }
            finally { Dispose(); }
        }

        public void Dispose()
        {
            _reg.Dispose();
            if (_consumed == 0 && !_queue.IsCompleted)
            {
                Cancel();
                _ctx.Unroute(this);
            }
        }
    }
}
