package llmrt

/*
#include "llm.h"
*/
import "C"

import (
	"sync"
	"unsafe"
)

// FinishReason tells why a sequence ended.
type FinishReason int32

const (
	FinishNone      FinishReason = C.LLM_FINISH_NONE
	FinishStop      FinishReason = C.LLM_FINISH_STOP      // end of generation or a stop string
	FinishLength    FinishReason = C.LLM_FINISH_LENGTH    // MaxTokens reached or the context is full
	FinishCancelled FinishReason = C.LLM_FINISH_CANCELLED // cancelled
	FinishError     FinishReason = C.LLM_FINISH_ERROR     // see Event.Err
)

func (f FinishReason) String() string {
	switch f {
	case FinishNone:
		return "none"
	case FinishStop:
		return "stop"
	case FinishLength:
		return "length"
	case FinishCancelled:
		return "cancelled"
	case FinishError:
		return "error"
	}
	return "unknown"
}

// Metrics of one sequence, carried by its final event.
type Metrics struct {
	PromptTokens       int
	CachedPromptTokens int
	GeneratedTokens    int
	QueueMs            float64
	TTFTMs             float64
	TPOTMs             float64
	TotalMs            float64
}

// Event is a generated token (Final false) or the end of a sequence (Final
// true; Text is any held-back remainder). Text is whole UTF-8.
type Event struct {
	Seq     int
	Token   int32 // -1 on a final event
	Text    string
	Logprob float32
	Final   bool
	Finish  FinishReason
	Metrics Metrics
	Err     error // set when Finish is FinishError
	// TopLogprobs: the request's TopLogprobs most likely tokens at this
	// position with their logprobs, most likely first (token events only).
	TopLogprobs []TokenLogprob
	// Final events, disaggregation: the producer's transfer descriptor
	// (Request.KVProduce), and the prompt tokens that arrived by transfer
	// (Request.KVTransferDesc) with the pull's status (nil: it worked).
	KVTransferDesc          string
	TransferredPromptTokens int
	KVTransferErr           error
	// A request with a ReasoningFormat: Text is the answer's share of the
	// event, Reasoning the thinking's; Part the part the token belongs to.
	Reasoning string
	Part      Part
}

// Part says whether a token belongs to the answer or the model's thinking.
type Part int32

const (
	PartContent   Part = C.LLM_PART_CONTENT
	PartReasoning Part = C.LLM_PART_REASONING
)

// ReasoningFormat tells how a request's output is split into thinking and
// answer (llm.h's llm_reasoning_format).
type ReasoningFormat int32

const (
	ReasoningNone     ReasoningFormat = C.LLM_REASONING_NONE     // one text, as written
	ReasoningDeepSeek ReasoningFormat = C.LLM_REASONING_DEEPSEEK // <think>...</think> (Qwen3, DeepSeek-R1)
	ReasoningHarmony  ReasoningFormat = C.LLM_REASONING_HARMONY  // gpt-oss's analysis / final channels
	ReasoningAuto     ReasoningFormat = C.LLM_REASONING_AUTO     // as the model's chat template says
)

// TokenLogprob is one alternative of Event.TopLogprobs.
type TokenLogprob struct {
	Token   int32
	Logprob float32
}

func convert(ev *C.llm_event) Event {
	e := Event{Seq: int(ev.seq_index), Token: int32(ev.token), Logprob: float32(ev.logprob)}
	if ev.text_len > 0 {
		e.Text = C.GoStringN(ev.text, C.int(ev.text_len))
	}
	if ev.reasoning_text != nil && ev.reasoning_text_len > 0 {
		e.Reasoning = C.GoStringN(ev.reasoning_text, C.int(ev.reasoning_text_len))
	}
	e.Part = Part(ev.part)
	if ev._type != C.LLM_EVENT_FINAL {
		if ev.top_logprobs != nil && ev.n_top_logprobs > 0 {
			for _, t := range unsafe.Slice(ev.top_logprobs, int(ev.n_top_logprobs)) {
				e.TopLogprobs = append(e.TopLogprobs, TokenLogprob{Token: int32(t.token), Logprob: float32(t.logprob)})
			}
		}
		return e
	}
	e.Final = true
	e.Finish = FinishReason(ev.finish_reason)
	m := &ev.metrics
	e.Metrics = Metrics{
		PromptTokens:       int(m.prompt_tokens),
		CachedPromptTokens: int(m.cached_prompt_tokens),
		GeneratedTokens:    int(m.generated_tokens),
		QueueMs:            float64(m.queue_ms),
		TTFTMs:             float64(m.ttft_ms),
		TPOTMs:             float64(m.tpot_ms),
		TotalMs:            float64(m.total_ms),
	}
	if ev.kv_transfer_desc != nil {
		e.KVTransferDesc = C.GoString(ev.kv_transfer_desc)
	}
	e.TransferredPromptTokens = int(ev.transferred_prompt_tokens)
	if ev.kv_transfer_status != C.LLM_OK {
		e.KVTransferErr = &Error{Status: Status(ev.kv_transfer_status), Message: "the KV transfer failed; the prompt was computed here"}
	}
	if e.Finish == FinishError {
		e.Err = &Error{Status: Status(ev.status), Message: C.GoString(ev.message)}
	}
	return e
}

// Sequence is the output of one of a request's N sequences.
type Sequence struct {
	Text    string
	Tokens  []int32
	Finish  FinishReason
	Metrics Metrics
	// From the final event (Event's fields of the same names).
	KVTransferDesc          string
	TransferredPromptTokens int
	KVTransferErr           error
}

// Result is everything a request produced.
type Result struct {
	Sequences []Sequence
}

// Text of the first sequence.
func (r *Result) Text() string { return r.seq0().Text }

// Tokens of the first sequence.
func (r *Result) Tokens() []int32 { return r.seq0().Tokens }

// Finish reason of the first sequence.
func (r *Result) Finish() FinishReason { return r.seq0().Finish }

func (r *Result) seq0() *Sequence {
	if len(r.Sequences) == 0 {
		r.Sequences = append(r.Sequences, Sequence{})
	}
	return &r.Sequences[0]
}

func (r *Result) add(ev Event) {
	for len(r.Sequences) <= ev.Seq {
		r.Sequences = append(r.Sequences, Sequence{})
	}
	s := &r.Sequences[ev.Seq]
	s.Text += ev.Text
	if ev.Final {
		s.Finish, s.Metrics = ev.Finish, ev.Metrics
		s.KVTransferDesc, s.TransferredPromptTokens, s.KVTransferErr = ev.KVTransferDesc, ev.TransferredPromptTokens, ev.KVTransferErr
	} else {
		s.Tokens = append(s.Tokens, ev.Token)
	}
}

// stream is one request's unbounded event queue: the pump never blocks on a
// slow consumer.
type stream struct {
	mu         sync.Mutex
	q          []Event
	done       bool
	ready      chan struct{} // capacity 1: "something changed"
	finalsLeft int           // owned by the pump (under routesMu)
}

func newStream(n int) *stream {
	if n < 1 {
		n = 1
	}
	return &stream{ready: make(chan struct{}, 1), finalsLeft: n}
}

func (s *stream) notify() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

func (s *stream) push(e Event) {
	s.mu.Lock()
	s.q = append(s.q, e)
	s.mu.Unlock()
	s.notify()
}

func (s *stream) finish() {
	s.mu.Lock()
	s.done = true
	s.mu.Unlock()
	s.notify()
}

// pop waits for the next event. ok is false once the stream is drained and
// done; ctxDone reports that cancel fired first.
func (s *stream) pop(cancel <-chan struct{}) (ev Event, ok bool, ctxDone bool) {
	for {
		s.mu.Lock()
		if len(s.q) > 0 {
			ev = s.q[0]
			s.q[0] = Event{}
			s.q = s.q[1:]
			s.mu.Unlock()
			return ev, true, false
		}
		done := s.done
		s.mu.Unlock()
		if done {
			return Event{}, false, false
		}
		select {
		case <-s.ready:
		case <-cancel:
			return Event{}, false, true
		}
	}
}
