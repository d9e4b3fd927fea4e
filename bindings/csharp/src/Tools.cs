// Constrained output and tool calls (llm.h 0.3, issue 20).
using System;
using System.Text;

namespace Llmrt
{
    /// <summary>What a request's output must match (llm_request.constraint_kind).</summary>
    public enum ConstraintKind { None = 0, JsonSchema = 1, JsonObject = 2, Regex = 3, Choice = 4, Grammar = 5 }

    /// <summary>Formats models write tool calls in (LLM_TOOL_FORMAT_*).</summary>
    public enum ToolFormat
    {
        Auto = 0,    // parsing: by the marker the text has
        Generic = 1, // the reply is JSON: a call, a list of calls, {"tool_calls": [...]}
        Hermes = 2,  // Qwen2.5 / Qwen3 / Hermes: <tool_call>{...}</tool_call>
        Llama3 = 3,  // Llama 3.x: {"name", "parameters"}, <|python_tag|>
        Mistral = 4  // [TOOL_CALLS][...] or [TOOL_CALLS]name[ARGS]{...}
    }

    public static class ToolCalls
    {
        /// <summary>Splits a model's reply into its tool calls and the rest, as
        /// compact JSON: {"content": "...", "tool_calls": [{"name", "arguments"}]}.
        /// Text without a call is all content; a call's marker followed by a
        /// malformed call throws LlmException(InvalidArgument) naming the offset.</summary>
        public static string Parse(ToolFormat format, string text)
        {
            var bytes = Encoding.UTF8.GetBytes(text ?? "");
            var output = new byte[bytes.Length + 64];
            UIntPtr n;
            int st = Native.llm_chat_parse_tool_calls((int)format, bytes, new UIntPtr((uint)bytes.Length), output,
                                                      new UIntPtr((uint)output.Length), out n);
            if (st == (int)LlmStatus.BufferTooSmall)
            {
                output = new byte[(int)n.ToUInt32()];
                st = Native.llm_chat_parse_tool_calls((int)format, bytes, new UIntPtr((uint)bytes.Length), output,
                                                      new UIntPtr((uint)output.Length), out n);
            }
            LlmException.Check(st);
            return Encoding.UTF8.GetString(output, 0, (int)n.ToUInt32());
        }
    }
}
