// Embeddings and reranking (issue 31): the blocking llm_embed over token
// arrays or texts, and llm_rerank_tokenize for a (query, document) pair.
using System;
using System.Runtime.InteropServices;
using System.Text;

namespace Llmrt
{
    /// <summary>How token vectors become one vector (LLM_POOLING_*); None (a
    /// vector per token) is not reachable through the blocking call.</summary>
    public enum Pooling { Model = -1, Mean = 1, Cls = 2, Last = 3, Rank = 4 }

    /// <summary>Options of LlmContext.Embed; the defaults are the model's
    /// pooling, L2-normalised, every dimension, long inputs refused.</summary>
    public sealed class EmbedOptions
    {
        public Pooling Pooling = Pooling.Model;
        public bool Raw;          // no L2 normalisation
        public int Dimensions;    // keep the first values (Matryoshka); 0 = all
        public bool Truncate;     // cut inputs longer than the context instead of failing
    }

    public sealed partial class LlmContext
    {
        /// <summary>One vector per input (token ids), through llm_embed:
        /// batched with whatever else the context runs. Bad input or a model
        /// that makes no embeddings throws LlmException with its status.</summary>
        public float[][] Embed(int[][] inputs, EmbedOptions options = null)
        {
            if (inputs == null) throw new ArgumentNullException("inputs");
            if (inputs.Length == 0) return new float[0][];
            var ptrs = new HGlobalBuffer[inputs.Length];
            var lens = new int[inputs.Length];
            try
            {
                using (var table = HGlobalBuffer.Alloc(IntPtr.Size * inputs.Length))
                {
                    for (int i = 0; i < inputs.Length; i++)
                    {
                        var t = inputs[i] ?? new int[0];
                        ptrs[i] = HGlobalBuffer.Alloc(4 * t.Length);
                        if (t.Length > 0) Marshal.Copy(t, 0, ptrs[i].DangerousGetHandle(), t.Length);
                        lens[i] = t.Length;
                        Marshal.WriteIntPtr(table.DangerousGetHandle(), i * IntPtr.Size, ptrs[i].DangerousGetHandle());
                    }
                    return Run(IntPtr.Zero, table.DangerousGetHandle(), lens, inputs.Length, options);
                }
            }
            finally
            {
                foreach (var p in ptrs) if (p != null) p.Dispose();
            }
        }

        /// <summary>Embed over texts, tokenized by the model's vocabulary.</summary>
        public float[][] Embed(string[] texts, EmbedOptions options = null)
        {
            if (texts == null) throw new ArgumentNullException("texts");
            if (texts.Length == 0) return new float[0][];
            var bufs = new HGlobalBuffer[texts.Length];
            try
            {
                using (var table = HGlobalBuffer.Alloc(IntPtr.Size * texts.Length))
                {
                    for (int i = 0; i < texts.Length; i++)
                    {
                        bufs[i] = HGlobalBuffer.Utf8(texts[i] ?? "");
                        Marshal.WriteIntPtr(table.DangerousGetHandle(), i * IntPtr.Size, bufs[i].DangerousGetHandle());
                    }
                    return Run(table.DangerousGetHandle(), IntPtr.Zero, null, texts.Length, options);
                }
            }
            finally
            {
                foreach (var b in bufs) if (b != null) b.Dispose();
            }
        }

        /// <summary>The token ids of a (query, document) pair as the model's
        /// reranker reads it, for Embed with Pooling.Rank.</summary>
        public int[] RerankTokenize(string query, string document)
        {
            var q = Nul(query);
            var d = Nul(document);
            var output = new int[q.Length + d.Length + 64];
            int n;
            int st = Native.llm_rerank_tokenize(_handle, q, d, output, output.Length, out n);
            if (st == (int)LlmStatus.BufferTooSmall)
            {
                output = new int[n];
                st = Native.llm_rerank_tokenize(_handle, q, d, output, output.Length, out n);
            }
            LlmException.Check(st);
            Array.Resize(ref output, n);
            return output;
        }

        static byte[] Nul(string s)
        {
            var b = Encoding.UTF8.GetBytes(s ?? "");
            Array.Resize(ref b, b.Length + 1);
            return b;
        }

        float[][] Run(IntPtr texts, IntPtr tokens, int[] lens, int n, EmbedOptions options)
        {
            options = options ?? new EmbedOptions();
            var p = Native.Init<NativeEmbedParams>(Native.llm_embed_params_init);
            p.pooling = (int)options.Pooling;
            p.normalize = options.Raw ? 0 : 1;
            p.dimensions = options.Dimensions;
            p.truncate = options.Truncate ? 1 : 0;
            int dim;
            int st = Native.llm_embed(_handle, texts, tokens, lens, n, ref p, null, UIntPtr.Zero, out dim);
            if (st != (int)LlmStatus.BufferTooSmall) LlmException.Check(st);
            var flat = new float[(long)n * Math.Max(dim, 0)];
            LlmException.Check(Native.llm_embed(_handle, texts, tokens, lens, n, ref p, flat,
                                                new UIntPtr((ulong)flat.Length), out dim));
            var rows = new float[n][];
            for (int i = 0; i < n; i++)
            {
                rows[i] = new float[dim];
                Array.Copy(flat, (long)i * dim, rows[i], 0, dim);
            }
            return rows;
        }
    }
}
