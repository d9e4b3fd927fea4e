package llmrt

/*
#include <stdlib.h>
#include "llm.h"
*/
import "C"

import "unsafe"

// Pooling says how an embedding model's token vectors become one vector
// (LLM_POOLING_*).
type Pooling int32

const (
	PoolingModel Pooling = C.LLM_POOLING_MODEL // the model file's
	PoolingMean  Pooling = C.LLM_POOLING_MEAN
	PoolingCLS   Pooling = C.LLM_POOLING_CLS
	PoolingLast  Pooling = C.LLM_POOLING_LAST
	PoolingRank  Pooling = C.LLM_POOLING_RANK // a reranker's score(s)
)

// EmbedOptions tune Embed; the zero value is the model's pooling,
// L2-normalised, every dimension, long inputs refused.
type EmbedOptions struct {
	// The pooling; the zero value means the model's (so LLM_POOLING_NONE,
	// one vector per token, is not reachable here).
	Pooling    Pooling
	Raw        bool // no L2 normalisation
	Dimensions int  // keep the first Dimensions values (Matryoshka); 0 = all
	Truncate   bool // cut inputs longer than the context instead of failing
}

// Embed returns one vector per input (token ids) from an embedding model,
// through llm_embed: batched with whatever else the context runs, without
// the event stream. An input longer than the context, an empty one, or a
// model that makes no embeddings is an *Error with its status.
func (c *Context) Embed(inputs [][]int32, opt *EmbedOptions) ([][]float32, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return nil, ErrClosed
	}
	if opt == nil {
		opt = &EmbedOptions{}
	}
	var p C.llm_embed_params
	C.llm_embed_params_init(&p)
	if opt.Pooling != 0 {
		p.pooling = C.int32_t(opt.Pooling)
	}
	if opt.Raw {
		p.normalize = 0
	}
	p.dimensions = C.int32_t(opt.Dimensions)
	if opt.Truncate {
		p.truncate = 1
	}
	n := len(inputs)
	if n == 0 {
		return nil, nil
	}
	// The token arrays live in C memory: cgo forbids C arrays of Go pointers.
	ptrs := (*[1 << 28]*C.llm_token)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(uintptr(0)))))[:n:n]
	lens := (*[1 << 28]C.int32_t)(C.calloc(C.size_t(n), 4))[:n:n]
	defer func() {
		for _, q := range ptrs {
			C.free(unsafe.Pointer(q))
		}
		C.free(unsafe.Pointer(&ptrs[0]))
		C.free(unsafe.Pointer(&lens[0]))
	}()
	for i, in := range inputs {
		ptrs[i] = (*C.llm_token)(C.calloc(C.size_t(len(in)+1), C.sizeof_llm_token))
		copy(unsafe.Slice((*int32)(unsafe.Pointer(ptrs[i])), len(in)), in)
		lens[i] = C.int32_t(len(in))
	}
	var dim C.int32_t
	err := call(func() C.llm_status {
		return C.llm_embed(c.raw, nil, &ptrs[0], &lens[0], C.int32_t(n), &p, nil, 0, &dim)
	})
	if e, ok := err.(*Error); !ok || e.Status != StatusBufferTooSmall {
		return nil, err // nil error here cannot happen: no room was given
	}
	total := n * int(dim)
	out := (*C.float)(C.calloc(C.size_t(total), 4))
	defer C.free(unsafe.Pointer(out))
	if err := call(func() C.llm_status {
		return C.llm_embed(c.raw, nil, &ptrs[0], &lens[0], C.int32_t(n), &p, out, C.size_t(total), &dim)
	}); err != nil {
		return nil, err
	}
	flat := unsafe.Slice((*float32)(unsafe.Pointer(out)), total)
	vecs := make([][]float32, n)
	for i := range vecs {
		vecs[i] = append([]float32(nil), flat[i*int(dim):(i+1)*int(dim)]...)
	}
	return vecs, nil
}

// RerankTokens lays out a (query, document) pair as the model's reranker
// reads it (llm_rerank_tokenize: the file's rerank template, or [BOS] query
// [EOS] [EOS] document [EOS]); score the ids with Embed and PoolingRank, Raw.
func (c *Context) RerankTokens(query, document string) ([]int32, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return nil, ErrClosed
	}
	q, d := C.CString(query), C.CString(document)
	defer C.free(unsafe.Pointer(q))
	defer C.free(unsafe.Pointer(d))
	var n C.int32_t
	err := call(func() C.llm_status { return C.llm_rerank_tokenize(c.raw, q, d, nil, 0, &n) })
	if e, ok := err.(*Error); !ok || e.Status != StatusBufferTooSmall {
		return nil, err
	}
	out := (*C.llm_token)(C.calloc(C.size_t(n)+1, C.sizeof_llm_token))
	defer C.free(unsafe.Pointer(out))
	if err := call(func() C.llm_status { return C.llm_rerank_tokenize(c.raw, q, d, out, n, &n) }); err != nil {
		return nil, err
	}
	return append([]int32(nil), unsafe.Slice((*int32)(unsafe.Pointer(out)), int(n))...), nil
}
