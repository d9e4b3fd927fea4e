// Test program for the C# binding: exits 0 when every test passes, 1 if not.
// Run from anywhere; the golden file is found through LLMRT_GOLDEN or
// relative to the current directory (bindings/csharp or the repo root).
using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Runtime.InteropServices;
using System.Threading;
using System.Threading.Tasks;
using Llmrt;

static class Tests
{
    sealed class Case { public string Prompt; public int[] PromptIds; public int[] Generated; }

    static int[] Ids(string s)
    {
        return s.Split(new[] { ' ' }, StringSplitOptions.RemoveEmptyEntries).Select(int.Parse).ToArray();
    }

    static List<Case> Golden()
    {
        string path = Environment.GetEnvironmentVariable("LLMRT_GOLDEN");
        if (string.IsNullOrEmpty(path))
            path = new[] { "../testdata/golden-greedy.tsv", "bindings/testdata/golden-greedy.tsv", "../../testdata/golden-greedy.tsv" }
                .FirstOrDefault(File.Exists) ?? "../testdata/golden-greedy.tsv";
        var cases = new List<Case>();
        foreach (var line in File.ReadAllLines(path))
        {
            if (line.Length == 0 || line[0] == '#') continue;
            var f = line.Split(new[] { '\t' }, 3);
            cases.Add(new Case { PromptIds = Ids(f[0]), Generated = Ids(f[1]), Prompt = f.Length > 2 ? f[2] : "" });
        }
        Check(cases.Count >= 5, "golden cases: " + cases.Count);
        return cases;
    }

    static GenerateRequest Greedy(Case c)
    {
        var r = new GenerateRequest { MaxTokens = c.Generated.Length, Sampling = SamplingOptions.Greedy() };
        if (c.Prompt.Length > 0) r.Prompt = c.Prompt; else r.PromptTokens = c.PromptIds;
        return r;
    }

    static void Check(bool ok, string what)
    {
        if (!ok) throw new Exception("check failed: " + what);
    }

    static int Offset(Type t, string field) { return Marshal.OffsetOf(t, field).ToInt32(); }

    static void Layout()
    {
        // The pinned ABI of llm.h (tests/test_abi.cpp) as this mirror sees it.
        Check(Marshal.SizeOf(typeof(NativeCtxParams)) == 248, "llm_ctx_params size");
        Check(Offset(typeof(NativeCtxParams), "reserved6") == 236, "llm_ctx_params.reserved6");
        Check(Offset(typeof(NativeCtxParams), "mmproj_path") == 240, "llm_ctx_params.mmproj_path");
        Check(Offset(typeof(NativeRequest), "parts") == 208, "llm_request.parts offset");
        Check(Offset(typeof(NativeRequest), "n_parts") == 216, "llm_request.n_parts offset");
        Check(Offset(typeof(NativeRequest), "reserved6") == 220, "llm_request.reserved6 offset");
        Check(Marshal.SizeOf(typeof(NativeContentPart)) == 40, "llm_content_part size");
        Check(Offset(typeof(NativeContentPart), "kind") == 4, "llm_content_part.kind");
        Check(Offset(typeof(NativeContentPart), "text") == 8, "llm_content_part.text");
        Check(Offset(typeof(NativeContentPart), "data") == 16, "llm_content_part.data");
        Check(Offset(typeof(NativeContentPart), "n_data") == 24, "llm_content_part.n_data");
        Check(Offset(typeof(NativeContentPart), "width") == 32, "llm_content_part.width");
        Check(Offset(typeof(NativeContentPart), "height") == 36, "llm_content_part.height");
        Check(Marshal.SizeOf(typeof(NativeChatMessageV2)) == 24, "llm_chat_message_v2 size");
        Check(Offset(typeof(NativeChatMessageV2), "n_parts") == 4, "llm_chat_message_v2.n_parts");
        Check(Offset(typeof(NativeChatMessageV2), "role") == 8, "llm_chat_message_v2.role");
        Check(Offset(typeof(NativeChatMessageV2), "parts") == 16, "llm_chat_message_v2.parts");
        {
            // llm_content_part_init writes the mirror's size and the defaults
            IntPtr buf = Marshal.AllocHGlobal(64);
            try
            {
                for (int i = 0; i < 64; ++i) Marshal.WriteByte(buf, i, 0x5a);
                Check(Native.llm_content_part_init(buf) == 0, "llm_content_part_init");
                var part = Marshal.PtrToStructure<NativeContentPart>(buf);
                Check(part.struct_size == 40 && part.kind == 0 && part.text == IntPtr.Zero && part.data == IntPtr.Zero &&
                      part.n_data == UIntPtr.Zero && part.width == 0 && part.height == 0, "llm_content_part_init defaults");
                Check(Marshal.ReadByte(buf, 40) == 0x5a, "llm_content_part_init wrote past its struct");
            }
            finally { Marshal.FreeHGlobal(buf); }
        }
        Check(Offset(typeof(NativeCtxParams), "moe_prefetch") == 160, "llm_ctx_params.moe_prefetch");
        Check(Offset(typeof(NativeCtxParams), "n_gpu_layers") == 96, "llm_ctx_params.n_gpu_layers");
        Check(Offset(typeof(NativeCtxParams), "kv_listen_addr") == 136, "llm_ctx_params.kv_listen_addr");
        Check(Offset(typeof(NativeCtxParams), "n_cpu_moe") == 144, "llm_ctx_params.n_cpu_moe");
        Check(Offset(typeof(NativeCtxParams), "moe_host_policy") == 148, "llm_ctx_params.moe_host_policy");
        Check(Offset(typeof(NativeCtxParams), "moe_cache_bytes") == 152, "llm_ctx_params.moe_cache_bytes");
        Check(Offset(typeof(NativeCtxParams), "main_gpu") == 168, "llm_ctx_params.main_gpu");
        Check(Offset(typeof(NativeCtxParams), "tensor_split") == 172, "llm_ctx_params.tensor_split");
        Check(Marshal.SizeOf(typeof(NativeSamplingParams)) == 64, "llm_sampling_params size");
        Check(Marshal.SizeOf(typeof(NativeMetrics)) == 56, "llm_metrics size");
        Check(Marshal.SizeOf(typeof(NativeEvent)) == 192, "llm_event size");
        Check(Marshal.SizeOf(typeof(NativeRequest)) == 224, "llm_request size");
        Check(Offset(typeof(NativeEvent), "reasoning_text") == 176, "llm_event.reasoning_text offset");
        Check(Offset(typeof(NativeEvent), "reasoning_text_len") == 184, "llm_event.reasoning_text_len offset");
        Check(Offset(typeof(NativeEvent), "part") == 188, "llm_event.part offset");
        Check(Offset(typeof(NativeRequest), "reasoning_format") == 200, "llm_request.reasoning_format offset");
        Check(Offset(typeof(NativeRequest), "reserved5") == 204, "llm_request.reserved5 offset");
        Check(Offset(typeof(NativeEvent), "kv_transfer_desc") == 160, "llm_event.kv_transfer_desc offset");
        Check(Offset(typeof(NativeEvent), "transferred_prompt_tokens") == 168, "llm_event.transferred_prompt_tokens offset");
        Check(Offset(typeof(NativeEvent), "kv_transfer_status") == 172, "llm_event.kv_transfer_status offset");
        Check(Offset(typeof(NativeRequest), "keep_kv") == 176, "llm_request.keep_kv offset");
        Check(Offset(typeof(NativeRequest), "kv_transfer_desc") == 184, "llm_request.kv_transfer_desc offset");
        Check(Offset(typeof(NativeRequest), "kv_produce") == 192, "llm_request.kv_produce offset");
        Check(Offset(typeof(NativeRequest), "constraint_kind") == 128, "llm_request.constraint_kind offset");
        Check(Offset(typeof(NativeRequest), "n_choices") == 132, "llm_request.n_choices offset");
        Check(Offset(typeof(NativeRequest), "constraint") == 136, "llm_request.constraint offset");
        Check(Offset(typeof(NativeRequest), "choices") == 144, "llm_request.choices offset");
        Check(Marshal.SizeOf(typeof(NativeLogitBias)) == 8, "llm_logit_bias size");
        Check(Marshal.SizeOf(typeof(NativeTopLogprob)) == 8, "llm_top_logprob size");
        Check(Offset(typeof(NativeSamplingParams), "logit_bias") == 48, "llm_sampling_params.logit_bias offset");
        Check(Offset(typeof(NativeSamplingParams), "n_logit_bias") == 56, "llm_sampling_params.n_logit_bias offset");
        Check(Offset(typeof(NativeEvent), "top_logprobs") == 128, "llm_event.top_logprobs offset");
        Check(Offset(typeof(NativeEvent), "n_top_logprobs") == 136, "llm_event.n_top_logprobs offset");
        Check(Offset(typeof(NativeRequest), "spec_mode") == 96, "llm_request.spec_mode offset");
        Check(Offset(typeof(NativeRequest), "stop_token_ids") == 104, "llm_request.stop_token_ids offset");
        Check(Offset(typeof(NativeRequest), "n_stop_token_ids") == 112, "llm_request.n_stop_token_ids offset");
        Check(Offset(typeof(NativeRequest), "min_tokens") == 116, "llm_request.min_tokens offset");
        Check(Offset(typeof(NativeRequest), "top_logprobs") == 120, "llm_request.top_logprobs offset");
        Check(Offset(typeof(NativeEvent), "metrics") == 56, "llm_event.metrics offset");
        Check(Offset(typeof(NativeRequest), "callback") == 72, "llm_request.callback offset");
        Check(Offset(typeof(NativeSamplingParams), "seed") == 40, "llm_sampling_params.seed offset");
        Check(Marshal.SizeOf(typeof(NativeEmbedParams)) == 32, "llm_embed_params size");
        Check(Offset(typeof(NativeEmbedParams), "pooling") == 4, "llm_embed_params.pooling offset");
        Check(Offset(typeof(NativeEmbedParams), "dimensions") == 12, "llm_embed_params.dimensions offset");
        Check(Offset(typeof(NativeEmbedParams), "tokenize_flags") == 20, "llm_embed_params.tokenize_flags offset");
        Check(Offset(typeof(NativeEmbedParams), "reserved0") == 28, "llm_embed_params.reserved0 offset");
    }

    static double Norm2(float[] v)
    {
        double n = 0;
        foreach (var x in v) n += (double)x * x;
        return n;
    }

    static LlmStatus StatusOf(Action a)
    {
        try { a(); }
        catch (LlmException e) { return e.Status; }
        return LlmStatus.Ok;
    }

    // llm-synth's tiny BERT (LLMRT_SYNTH, else the repo's build/bin; skipped
    // with a note without it): unit vectors of 64, a batch equal to single
    // calls, Matryoshka, texts, the rerank layout, clear errors.
    static void Embeddings()
    {
        using (var gen = new LlmContext())  // the built-in model generates: refused
            Check(StatusOf(() => gen.Embed(new[] { new[] { 1, 50, 60 } })) == LlmStatus.Unsupported, "embed on a generative model");
        string synth = Environment.GetEnvironmentVariable("LLMRT_SYNTH");
        if (string.IsNullOrEmpty(synth))
            synth = new[] { "../../build/bin/llm-synth", "build/bin/llm-synth" }.FirstOrDefault(File.Exists);
        if (synth == null || !File.Exists(synth))
        {
            Console.WriteLine("note: no llm-synth: the tiny BERT part skipped");
            return;
        }
        string path = Path.Combine(Path.GetTempPath(), "llmrt-cs-tiny-bert-" + System.Diagnostics.Process.GetCurrentProcess().Id + ".gguf");
        var psi = new System.Diagnostics.ProcessStartInfo(synth, "--shape tiny-bert --type f32 --out \"" + path + "\"")
        { UseShellExecute = false, RedirectStandardOutput = true };
        using (var proc = System.Diagnostics.Process.Start(psi))
        {
            proc.StandardOutput.ReadToEnd();
            proc.WaitForExit();
            Check(proc.ExitCode == 0, "llm-synth exit " + proc.ExitCode);
        }
        try
        {
            using (var ctx = new LlmContext(new ContextOptions { ModelPath = path, Backend = Backend.Cpu, Threads = 2 }))
            {
                var inputs = new[] { new[] { 2, 17, 40, 3 }, new[] { 2, 200, 201, 202, 203, 3 }, new[] { 2, 3 } };
                var vecs = ctx.Embed(inputs);
                Check(vecs.Length == 3, "3 vectors");
                for (int i = 0; i < vecs.Length; i++)
                {
                    Check(vecs[i].Length == 64 && Math.Abs(Norm2(vecs[i]) - 1) < 1e-5, "vector " + i + " a unit vector of 64");
                    Check(ctx.Embed(new[] { inputs[i] })[0].SequenceEqual(vecs[i]), "vector " + i + " alone = batched");
                }
                var cut = ctx.Embed(new[] { inputs[0] }, new EmbedOptions { Dimensions = 16, Pooling = Pooling.Cls });
                Check(cut[0].Length == 16 && Math.Abs(Norm2(cut[0]) - 1) < 1e-5, "Matryoshka 16");
                var raw = ctx.Embed(new[] { inputs[0] }, new EmbedOptions { Raw = true });
                Check(Math.Abs(Norm2(raw[0]) - 1) > 1e-3, "raw is not normalised");
                var t = ctx.Embed(new[] { "w57 w123" });
                Check(t[0].SequenceEqual(ctx.Embed(new[] { ctx.Tokenize("w57 w123") })[0]), "text = its tokens");
                var pair = ctx.RerankTokenize("w57", "w99 w100");
                var want = new List<int> { 2 };
                want.AddRange(ctx.Tokenize("w57", false));
                want.AddRange(new[] { 3, 3 });
                want.AddRange(ctx.Tokenize("w99 w100", false));
                want.Add(3);
                Check(pair.SequenceEqual(want), "rerank layout [CLS] q [SEP][SEP] d [SEP]");
                Check(StatusOf(() => ctx.Embed(new[] { new int[0] })) == LlmStatus.InvalidArgument, "empty input");
                Check(StatusOf(() => ctx.Embed(new[] { inputs[0] }, new EmbedOptions { Pooling = Pooling.Rank })) == LlmStatus.Unsupported, "rank without a head");
                Check(StatusOf(() => ctx.Embed(new[] { inputs[0] }, new EmbedOptions { Dimensions = 65 })) == LlmStatus.InvalidArgument, "dimensions 65");
                var longInput = Enumerable.Repeat(5, 600).ToArray();
                Check(StatusOf(() => ctx.Embed(new[] { longInput })) == LlmStatus.ContextOverflow, "600 tokens");
                Check(ctx.Embed(new[] { longInput }, new EmbedOptions { Truncate = true })[0].Length == 64, "600 tokens truncated");
            }
        }
        finally { File.Delete(path); }
    }

    static void GreedyMatchesGolden()
    {
        using (var ctx = new LlmContext())
        {
            foreach (var c in Golden())
            {
                var res = ctx.Generate(Greedy(c));
                Check(res.Tokens.SequenceEqual(c.Generated), "greedy output of \"" + c.Prompt + "\"");
                Check(res.Finish == FinishReason.Length, "finish " + res.Finish);
            }
        }
    }

    static void CallbackAndEnumerableAgree()
    {
        using (var ctx = new LlmContext())
        {
            var c = Golden()[1];
            var viaCallback = new System.Text.StringBuilder();
            var res = ctx.Generate(Greedy(c), e => viaCallback.Append(e.Text));
            string viaEnumerable = string.Concat(ctx.Stream(Greedy(c)));
            Check(res.Text.Length > 0, "text");
            Check(viaCallback.ToString() == res.Text, "callback text");
            Check(viaEnumerable == res.Text, "enumerable text: " + viaEnumerable);
            var ids = ctx.Tokenize("Once upon a time");
            Check(ids.SequenceEqual(Golden()[0].PromptIds), "tokenize");
        }
    }

    // Four streams at once on one context, plus one cancelled through a token.
    static void FourConcurrentStreamsAndACancel()
    {
        var cases = Golden();
        using (var ctx = new LlmContext())
        using (var cts = new CancellationTokenSource())
        {
            var streams = Enumerable.Range(0, 4).Select(i => Task.Run(() =>
            {
                var c = cases[i % cases.Count];
                var tokens = new List<int>();
                foreach (var e in ctx.Submit(Greedy(c)))
                    if (!e.IsFinal) tokens.Add(e.Token);
                Check(tokens.SequenceEqual(c.Generated), "stream " + i + " output");
            })).ToList();
            var cancelled = Task.Run(() =>
            {
                int n = 0;
                try
                {
                    ctx.Generate(new GenerateRequest("Once upon a time") { MaxTokens = 400, IgnoreEos = true },
                                 e => { if (++n == 3) cts.Cancel(); }, cts.Token);
                    Check(false, "no OperationCanceledException");
                }
                catch (OperationCanceledException) { }
                Check(n < 400, "tokens after cancel: " + n);
            });
            streams.Add(cancelled);
            Task.WaitAll(streams.ToArray());

            // Stream.Cancel(): the enumeration ends with a Cancelled final event.
            var s = ctx.Submit(new GenerateRequest("The sun was") { MaxTokens = 400, IgnoreEos = true });
            LlmEvent last = null;
            int count = 0;
            foreach (var e in s) { if (++count == 2) s.Cancel(); last = e; }
            Check(last != null && last.IsFinal && last.Finish == FinishReason.Cancelled, "cancelled final event");
        }
    }

    static void MissingModelFile()
    {
        try
        {
            using (new LlmContext(new ContextOptions { ModelPath = "/nonexistent/model.gguf" })) { }
            Check(false, "a missing model loaded");
        }
        catch (LlmException e)
        {
            Check(e.Status == LlmStatus.Io, "status " + e.Status);
            Check(e.NativeMessage.Contains("/nonexistent/model.gguf"), "message: " + e.Message);
            Check(e.Message.StartsWith("LLM_ERR_IO"), "message: " + e.Message);
        }
    }

    // K Q8_0 and V F16 (llm_ctx_params.kv_type_v) on the CPU: the context
    // runs; a V type that is no LLM_KV_* value reaches the library.
    static void KvTypesApart()
    {
        using (var ctx = new LlmContext(new ContextOptions { Backend = Backend.Cpu, ContextLength = 128, KvType = 3, KvTypeV = 2 }))
        {
            var res = ctx.Generate(new GenerateRequest { Prompt = "Once upon a time", MaxTokens = 4 });
            Check(res.Tokens.Count > 0, "K q8_0 + V f16 generated nothing");
        }
        try
        {
            using (new LlmContext(new ContextOptions { Backend = Backend.Cpu, KvTypeV = 99 })) { }
            Check(false, "kv_type_v 99 accepted");
        }
        catch (LlmException e) { Check(e.Status == LlmStatus.InvalidArgument && e.NativeMessage.Contains("kv_type_v"), "kv_type_v 99: " + e.Message); }
        // FP8 E4M3 is a CUDA (sm_89+) pool: the CPU refuses it by name.
        Check(ContextOptions.KvFp8E4m3 == 5, "KvFp8E4m3");
        try
        {
            using (new LlmContext(new ContextOptions { Backend = Backend.Cpu, KvType = ContextOptions.KvFp8E4m3 })) { }
            Check(false, "an FP8 E4M3 CPU pool accepted");
        }
        catch (LlmException e) { Check(e.Status == LlmStatus.Unsupported && e.NativeMessage.Contains("fp8_e4m3"), "fp8 on the CPU: " + e.Message); }
    }

    static void BadRequestAndDispose()
    {
        // n_gpu_layers: AUTO is accepted (the CPU backend ignores it), below it refused.
        Check(ContextOptions.GpuLayersAuto == -2 && ContextOptions.GpuLayersAll == -1, "GpuLayers constants");
        using (new LlmContext(new ContextOptions { Backend = Backend.Cpu, GpuLayers = ContextOptions.GpuLayersAuto })) { }
        try
        {
            using (new LlmContext(new ContextOptions { Backend = Backend.Cpu, GpuLayers = -3 })) { }
            Check(false, "n_gpu_layers -3 accepted");
        }
        catch (LlmException e) { Check(e.Status == LlmStatus.InvalidArgument, "status " + e.Status); }
        var ctx = new LlmContext();
        try
        {
            ctx.Submit(new GenerateRequest("hi") { MaxTokens = 0 });
            Check(false, "max_tokens 0 accepted");
        }
        catch (LlmException e) { Check(e.Status == LlmStatus.InvalidArgument, "status " + e.Status); }
        var s = ctx.Submit(new GenerateRequest("Once upon a time") { MaxTokens = 400, IgnoreEos = true });
        var it = s.GetEnumerator();
        Check(it.MoveNext(), "first event");
        ctx.Dispose();
        try
        {
            while (it.MoveNext()) { }
        }
        catch (LlmException e) { Check(e.Status == LlmStatus.Shutdown, "status " + e.Status); }
        ctx.Dispose();
    }

    // Issue 20: logit bias, min_tokens, stop token ids, top logprobs.
    static void SamplingOptionsThroughTheAbi()
    {
        using (var ctx = new LlmContext())
        {
            Func<int, GenerateRequest> greedy = max => new GenerateRequest("Once upon a time") { MaxTokens = max, Sampling = SamplingOptions.Greedy() };
            var plain = ctx.Generate(greedy(10)).Tokens;
            Check(plain.Count == 10, "plain: " + plain.Count);

            var r = greedy(10);
            r.Sampling.LogitBias[plain[0]] = float.NegativeInfinity;
            Check(!ctx.Generate(r).Tokens.Contains(plain[0]), "a banned token never appears");

            // stories260K's EOS (2) at +100: at once, or after MinTokens.
            r = greedy(10);
            r.Sampling.LogitBias[2] = 100f;
            var c = ctx.Generate(r);
            Check(c.Tokens.SequenceEqual(new[] { 2 }) && c.Finish == FinishReason.Stop, "EOS at +100: " + string.Join(",", c.Tokens));
            r.MinTokens = 4;
            c = ctx.Generate(r);
            Check(c.Tokens.Count == 5 && c.Tokens[4] == 2, "MinTokens 4: " + string.Join(",", c.Tokens));

            r = greedy(10);
            r.StopTokenIds = new[] { plain[4] };
            c = ctx.Generate(r);
            Check(c.Tokens[c.Tokens.Count - 1] == plain[4] && c.Finish == FinishReason.Stop, "stop token id");

            r = greedy(5);
            r.TopLogprobs = 3;
            int n = 0;
            using (var s = ctx.Submit(r))
            {
                foreach (var e in s)
                {
                    if (e.IsFinal) continue;
                    n++;
                    Check(e.TopLogprobs.Length == 3 && e.TopLogprobs[0].Key == e.Token && e.TopLogprobs[0].Value == e.Logprob &&
                          e.TopLogprobs[1].Value <= e.TopLogprobs[0].Value, "top logprobs of token " + e.Token);
                }
            }
            Check(n == 5, "token events: " + n);

            r = greedy(5);
            r.Sampling.LogitBias[1] = float.NaN;
            try { ctx.Submit(r); Check(false, "NaN bias accepted"); }
            catch (LlmException e) { Check(e.Status == LlmStatus.InvalidArgument, "status " + e.Status); }
            r = greedy(5);
            r.TopLogprobs = 21;
            try { ctx.Submit(r); Check(false, "top_logprobs 21 accepted"); }
            catch (LlmException e) { Check(e.Status == LlmStatus.InvalidArgument, "status " + e.Status); }
        }
    }

    static void ConstraintsAndToolCalls()
    {
        using (var ctx = new LlmContext())
        {
            // A choice and a regex: the output is one of the choices / matches.
            var r = new GenerateRequest("Once upon a time") { MaxTokens = 8, Sampling = SamplingOptions.Greedy(),
                                                              ConstraintKind = ConstraintKind.Choice, Choices = new[] { "yes", "no" } };
            var text = ctx.Generate(r).Text;
            Check(text == "yes" || text == "no", "choice output " + text);
            r = new GenerateRequest("Once upon a time") { MaxTokens = 8, ConstraintKind = ConstraintKind.Regex, Constraint = "(ab|cd)[0-9]" };
            text = ctx.Generate(r).Text;
            Check(System.Text.RegularExpressions.Regex.IsMatch(text, "^(ab|cd)[0-9]$"), "regex output " + text);
            r = new GenerateRequest("hi") { ConstraintKind = ConstraintKind.JsonSchema, Constraint = "{\"type\": 5}" };
            try { ctx.Submit(r); Check(false, "a bad schema accepted"); }
            catch (LlmException e) { Check(e.Status == LlmStatus.InvalidArgument, "schema status " + e.Status); }
            r = new GenerateRequest("hi") { ConstraintKind = ConstraintKind.Regex, Constraint = "a\0b" };
            try { ctx.Submit(r); Check(false, "a NUL in the regex accepted"); }
            catch (LlmException e) { Check(e.Status == LlmStatus.InvalidArgument, "status " + e.Status); }
            Check(ctx.ToolFormat() == ToolFormat.Generic, "the built-in model's tool format");
        }
        var json = ToolCalls.Parse(ToolFormat.Hermes, "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": 1}}</tool_call>");
        Check(json == "{\"content\":\"\",\"tool_calls\":[{\"name\":\"f\",\"arguments\":{\"x\":1}}]}", "hermes: " + json);
        json = ToolCalls.Parse(ToolFormat.Auto, "{\"name\": \"g\", \"arguments\": {\"city\": \"Zürich\"}}");
        Check(json == "{\"content\":\"\",\"tool_calls\":[{\"name\":\"g\",\"arguments\":{\"city\":\"Zürich\"}}]}", "generic: " + json);
        json = ToolCalls.Parse(ToolFormat.Generic, new string('\n', 1000)); // grows when escaped: the retry
        Check(json == "{\"content\":\"" + string.Concat(Enumerable.Repeat("\\n", 1000)) + "\",\"tool_calls\":[]}", "long content");
        try { ToolCalls.Parse(ToolFormat.Hermes, "<tool_call>{\"name\": "); Check(false, "a truncated call parsed"); }
        catch (LlmException e) { Check(e.Status == LlmStatus.InvalidArgument && e.NativeMessage.Contains("truncated"), "truncated: " + e.Message); }
    }

    static void KvStateFile()
    {
        var prompt = new List<int> { 1 };
        for (int i = 1; i < 40; i++) prompt.Add((7 * i + 11) % 250 + 3);
        string path = Path.Combine(Path.GetTempPath(), "llmrt-cs-kv-" + System.Diagnostics.Process.GetCurrentProcess().Id + ".llmkv");
        using (var a = new LlmContext())
        using (var b = new LlmContext())
        {
            var req = new GenerateRequest { PromptTokens = prompt.ToArray(), MaxTokens = 8, IgnoreEos = true, Sampling = SamplingOptions.Greedy() };
            var conv = prompt.Concat(a.Generate(req).Tokens).ToArray();
            int saved = a.ExportKvFile(conv, 0, path);
            Check(saved == 32, "exported " + saved + " tokens, want 32 (whole blocks of 47 computed)");
            Check(b.ImportKvFile(0, path) == 32, "imported 32 tokens");
            var next = new GenerateRequest { PromptTokens = conv, MaxTokens = 4, IgnoreEos = true, Sampling = SamplingOptions.Greedy() };
            var again = b.Generate(next);
            Check(again.Metrics.CachedPromptTokens == 32, "cached prompt tokens " + again.Metrics.CachedPromptTokens);
            Check(again.Tokens.SequenceEqual(a.Generate(next).Tokens), "the continuation after the import");
            try { b.ImportKvFile(0, path + ".missing"); Check(false, "a missing file imported"); }
            catch (LlmException e) { Check(e.Status == LlmStatus.Io, "missing file: " + e.Status); }
            File.WriteAllText(path, "not a KV stream at all");
            try { b.ImportKvFile(0, path); Check(false, "a damaged file imported"); }
            catch (LlmException e) { Check(e.Status == LlmStatus.KvCorrupt, "damaged file: " + e.Status); }
        }
        File.Delete(path);
    }

    // Pictures in the prompt (issue 36) through GenerateRequest.Parts on
    // llm-synth's tiny-gemma3 with its projector (ContextOptions.MmprojPath):
    // the PNG and the same pixels given raw (Pillow's decode in
    // tests/data/images) give the same greedy tokens; the picture's 16 soft
    // tokens are prompt positions; a raw picture of the wrong size is refused.
    // Skipped with a note without llm-synth (LLMRT_SYNTH, else build/bin).
    static void ImageParts()
    {
        string synth = Environment.GetEnvironmentVariable("LLMRT_SYNTH");
        if (string.IsNullOrEmpty(synth))
            synth = new[] { "../../build/bin/llm-synth", "build/bin/llm-synth" }.FirstOrDefault(File.Exists);
        string images = new[] { "../../tests/data/images", "tests/data/images" }.FirstOrDefault(Directory.Exists);
        if (synth == null || !File.Exists(synth) || images == null)
        {
            Console.WriteLine("note: no llm-synth or tests/data/images: the image part skipped");
            return;
        }
        string dir = Path.Combine(Path.GetTempPath(), "llmrt-cs-images-" + System.Diagnostics.Process.GetCurrentProcess().Id);
        Directory.CreateDirectory(dir);
        string model = Path.Combine(dir, "g3.gguf"), mmproj = Path.Combine(dir, "mmproj.gguf");
        var psi = new System.Diagnostics.ProcessStartInfo(synth, "--shape tiny-gemma3 --type f32 --seed 7 --out \"" + model +
                                                                 "\" --mmproj \"" + mmproj + "\"")
        { UseShellExecute = false, RedirectStandardOutput = true };
        using (var proc = System.Diagnostics.Process.Start(psi))
        {
            proc.StandardOutput.ReadToEnd();
            proc.WaitForExit();
            Check(proc.ExitCode == 0, "llm-synth exit " + proc.ExitCode);
        }
        try
        {
            using (var ctx = new LlmContext(new ContextOptions { ModelPath = model, MmprojPath = mmproj, Backend = Backend.Cpu,
                                                                 Threads = 2, ContextLength = 512 }))
            {
                byte[] png = File.ReadAllBytes(Path.Combine(images, "rgb.png"));
                byte[] rgb = File.ReadAllBytes(Path.Combine(images, "rgb.png.rgb"));
                Func<ContentPart[], Completion> run = parts => ctx.Generate(new GenerateRequest
                {
                    Parts = parts, MaxTokens = 6, IgnoreEos = true, Sampling = SamplingOptions.Greedy()
                });
                Completion a;
                try { a = run(new[] { ContentPart.FromText("Describe: "), ContentPart.FromImage(png) }); }
                catch (LlmException e) when (e.Status == LlmStatus.Unsupported)
                {
                    Console.WriteLine("note: built without the image codecs: " + e.Message);
                    return;
                }
                var b = run(new[] { ContentPart.FromText("Describe: "), ContentPart.FromRgb(rgb, 17, 11) });
                Check(a.Tokens.Count == 6 && a.Tokens.SequenceEqual(b.Tokens), "PNG and raw RGB give the same 6 tokens");
                var text = run(new[] { ContentPart.FromText("Describe: ") });
                Check(a.Metrics.PromptTokens >= text.Metrics.PromptTokens + 16,
                      "the picture's 16 positions: " + a.Metrics.PromptTokens + " vs " + text.Metrics.PromptTokens);
                var shortRgb = rgb.Take(rgb.Length - 1).ToArray();
                Check(StatusOf(() => run(new[] { ContentPart.FromText("x"), ContentPart.FromRgb(shortRgb, 17, 11) })) ==
                      LlmStatus.InvalidArgument, "a short RGB part is refused");
            }
        }
        finally { Directory.Delete(dir, true); }
    }

    static int Main()
    {
        var tests = new Dictionary<string, Action>
        {
            { "Layout", Layout },
            { "GreedyMatchesGolden", GreedyMatchesGolden },
            { "CallbackAndEnumerableAgree", CallbackAndEnumerableAgree },
            { "FourConcurrentStreamsAndACancel", FourConcurrentStreamsAndACancel },
            { "MissingModelFile", MissingModelFile },
            { "BadRequestAndDispose", BadRequestAndDispose },
            { "KvTypesApart", KvTypesApart },
            { "SamplingOptionsThroughTheAbi", SamplingOptionsThroughTheAbi },
            { "ConstraintsAndToolCalls", ConstraintsAndToolCalls },
            { "KvStateFile", KvStateFile },
            { "Embeddings", Embeddings },
            { "ImageParts", ImageParts },
        };
        int passed = 0, failed = 0;
        foreach (var t in tests)
        {
            try
            {
                t.Value();
                Console.WriteLine("PASS " + t.Key);
                passed++;
            }
            catch (Exception e)
            {
                Console.WriteLine("FAIL " + t.Key + ": " + e);
                failed++;
            }
        }
        Console.WriteLine(passed + " passed, " + failed + " failed");
        return failed == 0 ? 0 : 1;
    }
}
