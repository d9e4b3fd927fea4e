package llmrt

/*
#include <stdlib.h>
#include "llm.h"
*/
import "C"

import (
	"strings"
	"unsafe"
)

// Sampling settings. DefaultSampling gives the library's defaults; Greedy
// always takes the most likely token.
type Sampling struct {
	Temperature       float32
	TopK              int
	TopP              float32
	MinP              float32
	RepetitionPenalty float32
	FrequencyPenalty  float32
	PresencePenalty   float32
	PenaltyLastN      int
	Seed              uint64 // SeedRandom draws one
	// LogitBias adds a bias in [-100, 100] (or -Inf: never sampled) to a
	// token id's logit at every step.
	LogitBias map[int32]float32
}

// SeedRandom as Sampling.Seed draws a random seed.
const SeedRandom = ^uint64(0)

// DefaultSampling returns the library's default sampling settings.
func DefaultSampling() Sampling {
	var p C.llm_sampling_params
	C.llm_sampling_params_init(&p)
	return Sampling{
		Temperature:       float32(p.temperature),
		TopK:              int(p.top_k),
		TopP:              float32(p.top_p),
		MinP:              float32(p.min_p),
		RepetitionPenalty: float32(p.repetition_penalty),
		FrequencyPenalty:  float32(p.frequency_penalty),
		PresencePenalty:   float32(p.presence_penalty),
		PenaltyLastN:      int(p.penalty_last_n),
		Seed:              uint64(p.seed),
	}
}

// Greedy returns settings that always pick the most likely token.
func Greedy() Sampling {
	s := DefaultSampling()
	s.Temperature = 0
	return s
}

// Request is one generation. Zero values take the library's defaults
// (MaxTokens 256, N 1, default sampling).
type Request struct {
	Prompt       string  // text, tokenized with BOS as the model says
	PromptTokens []int32 // used verbatim (no BOS added) when Prompt is ""
	// Parts: the prompt as text and pictures in order (llm_request.parts),
	// instead of Prompt or PromptTokens; pictures need Params.MMProjPath.
	Parts        []ContentPart
	MaxTokens    int
	Sampling     *Sampling
	Stop         []string // stop strings, not included in the output
	IgnoreEOS    bool
	N            int // parallel samples from one prompt
	Priority     int
	StopTokenIDs []int32 // end a sequence like EOS (even with IgnoreEOS)
	MinTokens    int     // EOS and StopTokenIDs are masked until this many tokens exist
	TopLogprobs  int     // 0..20 alternatives in each token event's TopLogprobs
	// What the output must match: the kind, and its text (JSONSchema, Regex,
	// Grammar) or Choices (Choice).
	ConstraintKind ConstraintKind
	Constraint     string
	Choices        []string
	// Disaggregation: KVProduce (producer context) asks for a transfer
	// descriptor in the final event; KVTransferDesc (consumer context) is
	// one, whose KV is pulled before the request runs.
	KVProduce      bool
	KVTransferDesc string
	// Keep the model's thinking apart from its answer (Event.Reasoning,
	// Event.Part); constraints then apply to the answer only.
	ReasoningFormat ReasoningFormat
	// JSON constraints: any JSON whitespace between tokens instead of the
	// bounded layout (none, one space, or a newline and indentation by
	// depth); LLM_WHITESPACE_FREE.
	WhitespaceFlexible bool
}

// cRequest is a request in C memory, so no Go pointer reaches the library.
type cRequest struct {
	req  *C.llm_request
	bufs []unsafe.Pointer
}

func (r *cRequest) alloc(size C.size_t) unsafe.Pointer {
	p := C.calloc(1, size)
	r.bufs = append(r.bufs, p)
	return p
}

func (r *cRequest) cstring(s string) *C.char {
	p := C.CString(s)
	r.bufs = append(r.bufs, unsafe.Pointer(p))
	return p
}

func (r *cRequest) free() {
	for _, p := range r.bufs {
		C.free(p)
	}
	r.bufs = nil
}

func newCRequest(q *Request) (*cRequest, error) {
	if strings.IndexByte(q.Prompt, 0) >= 0 {
		return nil, &Error{Status: StatusInvalidArgument, Message: "prompt contains a NUL byte"}
	}
	r := &cRequest{}
	r.req = (*C.llm_request)(r.alloc(C.sizeof_llm_request))
	C.llm_request_init(r.req)
	if len(q.Parts) > 0 {
		if err := r.setParts(q.Parts); err != nil {
			r.free()
			return nil, err
		}
		if q.Prompt != "" || len(q.PromptTokens) > 0 { // the library refuses more than one
			r.req.prompt = r.cstring(q.Prompt)
		}
	} else if q.Prompt != "" {
		r.req.prompt = r.cstring(q.Prompt)
	} else if len(q.PromptTokens) > 0 {
		toks := (*C.llm_token)(r.alloc(C.size_t(len(q.PromptTokens)) * C.sizeof_llm_token))
		copy(unsafe.Slice((*int32)(unsafe.Pointer(toks)), len(q.PromptTokens)), q.PromptTokens)
		r.req.prompt_tokens = toks
		r.req.n_prompt_tokens = C.int32_t(len(q.PromptTokens))
	} else {
		r.req.prompt = r.cstring("") // the library reports the empty prompt
	}
	if q.MaxTokens != 0 {
		r.req.max_tokens = C.int32_t(q.MaxTokens)
	}
	if q.N != 0 {
		r.req.n = C.int32_t(q.N)
	}
	r.req.priority = C.int32_t(q.Priority)
	if q.KVProduce {
		r.req.kv_produce = 1
	}
	r.req.reasoning_format = C.int32_t(q.ReasoningFormat)
	if q.KVTransferDesc != "" {
		r.req.kv_transfer_desc = r.cstring(q.KVTransferDesc)
	}
	if q.IgnoreEOS {
		r.req.ignore_eos = 1
	}
	if q.Sampling != nil {
		s := q.Sampling
		sp := (*C.llm_sampling_params)(r.alloc(C.sizeof_llm_sampling_params))
		C.llm_sampling_params_init(sp)
		sp.temperature = C.float(s.Temperature)
		sp.top_k = C.int32_t(s.TopK)
		sp.top_p = C.float(s.TopP)
		sp.min_p = C.float(s.MinP)
		sp.repetition_penalty = C.float(s.RepetitionPenalty)
		sp.frequency_penalty = C.float(s.FrequencyPenalty)
		sp.presence_penalty = C.float(s.PresencePenalty)
		sp.penalty_last_n = C.int32_t(s.PenaltyLastN)
		sp.seed = C.uint64_t(s.Seed)
		if len(s.LogitBias) > 0 {
			arr := (*C.llm_logit_bias)(r.alloc(C.size_t(len(s.LogitBias)) * C.sizeof_llm_logit_bias))
			entries := unsafe.Slice(arr, len(s.LogitBias))
			i := 0
			for tok, b := range s.LogitBias {
				entries[i].token = C.llm_token(tok)
				entries[i].bias = C.float(b)
				i++
			}
			sp.logit_bias = arr
			sp.n_logit_bias = C.int32_t(len(s.LogitBias))
		}
		r.req.sampling = sp
	}
	if len(q.StopTokenIDs) > 0 {
		toks := (*C.llm_token)(r.alloc(C.size_t(len(q.StopTokenIDs)) * C.sizeof_llm_token))
		copy(unsafe.Slice((*int32)(unsafe.Pointer(toks)), len(q.StopTokenIDs)), q.StopTokenIDs)
		r.req.stop_token_ids = toks
		r.req.n_stop_token_ids = C.int32_t(len(q.StopTokenIDs))
	}
	r.req.min_tokens = C.int32_t(q.MinTokens)
	r.req.top_logprobs = C.int32_t(q.TopLogprobs)
	r.req.constraint_kind = C.int32_t(q.ConstraintKind)
	if q.WhitespaceFlexible {
		r.req.constraint_whitespace = C.LLM_WHITESPACE_FREE
	}
	if q.Constraint != "" {
		if strings.IndexByte(q.Constraint, 0) >= 0 {
			r.free()
			return nil, &Error{Status: StatusInvalidArgument, Message: "constraint contains a NUL byte"}
		}
		r.req.constraint = r.cstring(q.Constraint)
	}
	if len(q.Choices) > 0 {
		arr := (**C.char)(r.alloc(C.size_t(len(q.Choices)) * C.size_t(unsafe.Sizeof((*C.char)(nil)))))
		ptrs := unsafe.Slice(arr, len(q.Choices))
		for i, s := range q.Choices {
			if strings.IndexByte(s, 0) >= 0 {
				r.free()
				return nil, &Error{Status: StatusInvalidArgument, Message: "choice contains a NUL byte"}
			}
			ptrs[i] = r.cstring(s)
		}
		r.req.choices = arr
		r.req.n_choices = C.int32_t(len(q.Choices))
	}
	if len(q.Stop) > 0 {
		arr := (**C.char)(r.alloc(C.size_t(len(q.Stop)) * C.size_t(unsafe.Sizeof((*C.char)(nil)))))
		ptrs := unsafe.Slice(arr, len(q.Stop))
		for i, s := range q.Stop {
			if strings.IndexByte(s, 0) >= 0 {
				r.free()
				return nil, &Error{Status: StatusInvalidArgument, Message: "stop string contains a NUL byte"}
			}
			ptrs[i] = r.cstring(s)
		}
		r.req.stop = arr
		r.req.n_stop = C.int32_t(len(q.Stop))
	}
	return r, nil
}
