package llmrt

/*
#include <stdlib.h>
#include "llm.h"
*/
import "C"

import "unsafe"

// ConstraintKind says what a request's output must match
// (llm_request.constraint_kind); the constraint is compiled at submit.
type ConstraintKind int32

const (
	ConstraintNone       ConstraintKind = C.LLM_CONSTRAINT_NONE
	ConstraintJSONSchema ConstraintKind = C.LLM_CONSTRAINT_JSON_SCHEMA // Constraint: the schema (JSON text)
	ConstraintJSONObject ConstraintKind = C.LLM_CONSTRAINT_JSON_OBJECT // any JSON object
	ConstraintRegex      ConstraintKind = C.LLM_CONSTRAINT_REGEX       // Constraint: the pattern
	ConstraintChoice     ConstraintKind = C.LLM_CONSTRAINT_CHOICE      // Choices: one of them
	ConstraintGrammar    ConstraintKind = C.LLM_CONSTRAINT_GRAMMAR     // Constraint: the EBNF grammar
)

// ToolFormat is a format models write tool calls in (LLM_TOOL_FORMAT_*).
type ToolFormat int32

const (
	ToolFormatAuto    ToolFormat = C.LLM_TOOL_FORMAT_AUTO    // parsing: by the marker the text has
	ToolFormatGeneric ToolFormat = C.LLM_TOOL_FORMAT_GENERIC // the reply is JSON: a call, a list, {"tool_calls": [...]}
	ToolFormatHermes  ToolFormat = C.LLM_TOOL_FORMAT_HERMES  // Qwen2.5 / Qwen3 / Hermes: <tool_call>{...}</tool_call>
	ToolFormatLlama3  ToolFormat = C.LLM_TOOL_FORMAT_LLAMA3  // Llama 3.x: {"name", "parameters"}, <|python_tag|>
	ToolFormatMistral ToolFormat = C.LLM_TOOL_FORMAT_MISTRAL // [TOOL_CALLS][...] or [TOOL_CALLS]name[ARGS]{...}
)

// ParseToolCalls splits a model's reply into its tool calls and the rest, as
// compact JSON: {"content": "...", "tool_calls": [{"name", "arguments"}]}
// (decode it with encoding/json). Text without a call is all content; a
// call's marker followed by a malformed call is a StatusInvalidArgument error
// naming the byte offset.
func ParseToolCalls(format ToolFormat, text string) (string, error) {
	var ctext *C.char
	if len(text) > 0 {
		ctext = (*C.char)(C.CBytes([]byte(text)))
		defer C.free(unsafe.Pointer(ctext))
	}
	capacity := len(text) + 64
	for {
		buf := (*C.char)(C.malloc(C.size_t(capacity)))
		var n C.size_t
		err := call(func() C.llm_status {
			return C.llm_chat_parse_tool_calls(C.int32_t(format), ctext, C.size_t(len(text)), buf, C.size_t(capacity), &n)
		})
		if e, ok := err.(*Error); ok && e.Status == StatusBufferTooSmall {
			C.free(unsafe.Pointer(buf))
			capacity = int(n)
			continue
		}
		out := ""
		if err == nil {
			out = C.GoStringN(buf, C.int(n))
		}
		C.free(unsafe.Pointer(buf))
		return out, err
	}
}

// ToolFormat returns the format the model's chat template writes calls in.
func (c *Context) ToolFormat() (ToolFormat, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return 0, ErrClosed
	}
	var f C.int32_t
	err := call(func() C.llm_status { return C.llm_chat_tool_format(c.raw, nil, &f) })
	return ToolFormat(f), err
}
