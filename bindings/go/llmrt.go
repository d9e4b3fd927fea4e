// Package llmrt runs LLM inference through the llmrt C library.
//
// A Context owns one loaded model and its engine. One goroutine per context
// polls the library and routes each event to the stream of its request, so
// any number of goroutines can generate on one Context at once. Generation
// takes a context.Context: cancelling it cancels the request.
//
// No Go pointer is ever handed to C: requests are built in C memory and
// events are drained into a C array, then copied.
package llmrt

/*
#include <stdlib.h>
#include "llm.h"
*/
import "C"

import (
	"context"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Backend selects the compute backend.
type Backend int32

const (
	BackendAuto Backend = C.LLM_BACKEND_AUTO // CUDA when available, else CPU
	BackendCPU  Backend = C.LLM_BACKEND_CPU
	BackendCUDA Backend = C.LLM_BACKEND_CUDA
)

// Params configure Open. Zero values take the library's defaults; an empty
// ModelPath is the model built into the library.
type Params struct {
	ModelPath      string
	Backend        Backend
	Threads        int
	ContextLength  int
	KVBlockSize    int
	KVBlocks       int
	MaxSeqs        int
	MaxBatchTokens int
	MaxQueued      int
	// KV cache element types (llm_ctx_params.kv_type, kv_type_v): K's
	// (KVAuto: the backend's own) and V's when it differs (KVAuto: as
	// KVType; both backends store each side in its own type).
	KVType  KVType
	KVTypeV KVType
	// Prefill/decode disaggregation (llm_ctx_params.kv_role; a build
	// without UCX refuses any role with StatusUnsupported).
	KVRole       KVRole
	KVLeaseMs    int    // producer: lease duration; 0 = 30000
	KVListenAddr string // producer: "host:port" UCX listens on; "" = 127.0.0.1:0
	// Mixture of Experts on CUDA (llm_ctx_params.n_cpu_moe): the experts
	// of the first CPUMoELayers MoE layers (-1: all) stay in host memory,
	// served through a device expert cache of MoECacheBytes (0: one
	// layer's experts).
	CPUMoELayers  int
	MoECacheBytes uint64
	// Several GPUs (llm_ctx_params.main_gpu, tensor_split): OnlyGPU runs
	// the device layers on device *OnlyGPU alone (nil: split over every
	// device, main_gpu -1); TensorSplit gives each device's share (nil or
	// all 0: in proportion to free memory; at most MaxDevices entries).
	OnlyGPU     *int
	TensorSplit []float32
	// Layers on the GPU (llm_ctx_params.n_gpu_layers): nil is every layer
	// (GPULayersAll); a count; GPULayersAuto fits as many as the devices'
	// free memory holds (MoE experts to host memory first, the CPU when
	// none fits). The CPU backend ignores it.
	GPULayers *int
	// Images in the prompt (llm_ctx_params.mmproj_path): a projector file
	// (llama.cpp's --mmproj) for the text model; "" = none.
	MMProjPath string
}

// GPULayersAll and GPULayersAuto are LLM_GPU_LAYERS_ALL and _AUTO.
const (
	GPULayersAll  = int(C.LLM_GPU_LAYERS_ALL)
	GPULayersAuto = int(C.LLM_GPU_LAYERS_AUTO)
)

// MaxDevices is LLM_MAX_DEVICES: the longest TensorSplit.
const MaxDevices = int(C.LLM_MAX_DEVICES)

// DeviceStats is llm_device_stats: one CUDA device's share of a context.
type DeviceStats struct {
	Device, FirstLayer, EndLayer int
	WeightBytes, KVPoolBytes     uint64
	UsedBytes, TotalBytes        uint64
}

// KVType is an LLM_KV_* element type of the KV cache.
type KVType int32

const (
	KVAuto KVType = C.LLM_KV_AUTO
	KVF32  KVType = C.LLM_KV_F32
	KVF16  KVType = C.LLM_KV_F16
	KVQ8_0 KVType = C.LLM_KV_Q8_0
	KVQ4_0 KVType = C.LLM_KV_Q4_0
	// FP8 E4M3 with a scale per 32 values: CUDA sm_89+ only (the CPU refuses it).
	KVFP8E4M3 KVType = C.LLM_KV_FP8_E4M3
)

// KVRole is llm_ctx_params.kv_role.
type KVRole int32

const (
	KVRoleNone     KVRole = C.LLM_KV_ROLE_NONE
	KVRoleProducer KVRole = C.LLM_KV_ROLE_PRODUCER
	KVRoleConsumer KVRole = C.LLM_KV_ROLE_CONSUMER
	KVRoleBoth     KVRole = C.LLM_KV_ROLE_BOTH
)

// Context is a loaded model with its engine. Safe for concurrent use;
// Close must not race the other methods.
type Context struct {
	raw *C.llm_ctx

	mu     sync.RWMutex // held for reading around calls into raw; Close takes it for writing
	closed bool

	routesMu sync.Mutex
	routes   map[uint64]*stream

	stopping atomic.Bool
	pumpDone chan struct{}
	events   *C.llm_event // pollCap events in C memory
}

const pollCap = 64

// Open loads the model and starts the engine. A missing model file returns
// an *Error with StatusIO and the library's message.
func Open(p *Params) (*Context, error) {
	if p == nil {
		p = &Params{}
	}
	var cp C.llm_ctx_params
	C.llm_ctx_params_init(&cp)
	if p.ModelPath != "" {
		path := C.CString(p.ModelPath)
		defer C.free(unsafe.Pointer(path))
		cp.model_path = path
	}
	cp.backend = C.int32_t(p.Backend)
	cp.n_threads = C.int32_t(p.Threads)
	cp.n_ctx = C.int32_t(p.ContextLength)
	cp.kv_block_size = C.int32_t(p.KVBlockSize)
	cp.n_kv_blocks = C.int32_t(p.KVBlocks)
	cp.max_seqs = C.int32_t(p.MaxSeqs)
	cp.max_batch_tokens = C.int32_t(p.MaxBatchTokens)
	cp.max_queued = C.int32_t(p.MaxQueued)
	cp.kv_type = C.int32_t(p.KVType)
	cp.kv_type_v = C.int32_t(p.KVTypeV)
	cp.kv_role = C.int32_t(p.KVRole)
	cp.kv_lease_ms = C.int32_t(p.KVLeaseMs)
	cp.n_cpu_moe = C.int32_t(p.CPUMoELayers)
	cp.moe_cache_bytes = C.uint64_t(p.MoECacheBytes)
	if p.KVListenAddr != "" {
		addr := C.CString(p.KVListenAddr)
		defer C.free(unsafe.Pointer(addr))
		cp.kv_listen_addr = addr
	}
	if p.OnlyGPU != nil {
		cp.main_gpu = C.int32_t(*p.OnlyGPU)
	}
	if p.GPULayers != nil {
		cp.n_gpu_layers = C.int32_t(*p.GPULayers)
	}
	if p.MMProjPath != "" {
		mm := C.CString(p.MMProjPath)
		defer C.free(unsafe.Pointer(mm))
		cp.mmproj_path = mm
	}
	if len(p.TensorSplit) > MaxDevices {
		return nil, &Error{Status: StatusInvalidArgument, Message: "TensorSplit has more than MaxDevices entries"}
	}
	for i, share := range p.TensorSplit {
		cp.tensor_split[i] = C.float(share)
	}
	c := &Context{routes: make(map[uint64]*stream), pumpDone: make(chan struct{})}
	// cp lives in Go memory but holds only C pointers, which cgo allows.
	if err := call(func() C.llm_status { return C.llm_ctx_create(&cp, &c.raw) }); err != nil {
		return nil, err
	}
	c.events = (*C.llm_event)(C.calloc(pollCap, C.sizeof_llm_event))
	go c.pump()
	return c, nil
}

// Close cancels what is in flight, stops the engine and frees the model.
// Streams still open end with ErrClosed. Calling Close twice is harmless.
func (c *Context) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	c.stopping.Store(true)
	C.llm_wakeup(c.raw)
	<-c.pumpDone
	C.llm_ctx_destroy(c.raw)
	C.free(unsafe.Pointer(c.events))
	c.raw, c.events = nil, nil
	c.routesMu.Lock()
	for id, s := range c.routes {
		s.push(Event{Final: true, Finish: FinishError, Err: ErrClosed})
		s.finish()
		delete(c.routes, id)
	}
	c.routesMu.Unlock()
	return nil
}

// pump is the only caller of llm_poll; it routes events by request id.
func (c *Context) pump() {
	defer close(c.pumpDone)
	evs := unsafe.Slice(c.events, pollCap)
	for !c.stopping.Load() {
		evs[0].struct_size = C.uint32_t(C.sizeof_llm_event)
		var n C.uint32_t
		st := C.llm_poll(c.raw, c.events, pollCap, &n, -1)
		if st != C.LLM_OK {
			continue // not expected with these arguments; a wakeup ends the loop
		}
		c.routesMu.Lock()
		for i := 0; i < int(n); i++ {
			ev := &evs[i]
			s := c.routes[uint64(ev.request_id)]
			if s == nil {
				continue // its consumer gave up (cancelled and left)
			}
			e := convert(ev)
			s.push(e)
			if e.Final {
				s.finalsLeft--
				if s.finalsLeft == 0 {
					s.finish()
					delete(c.routes, uint64(ev.request_id))
				}
			}
		}
		c.routesMu.Unlock()
	}
}

// submit queues a request and registers its stream before the pump can see
// its first event.
func (c *Context) submit(q *Request) (uint64, *stream, error) {
	cr, err := newCRequest(q)
	if err != nil {
		return 0, nil, err
	}
	defer cr.free()
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return 0, nil, ErrClosed
	}
	n := int(cr.req.n)
	s := newStream(n)
	var id C.llm_request_id
	c.routesMu.Lock()
	defer c.routesMu.Unlock()
	if err := call(func() C.llm_status { return C.llm_submit(c.raw, cr.req, &id) }); err != nil {
		return 0, nil, err
	}
	c.routes[uint64(id)] = s
	return uint64(id), s, nil
}

// cancel stops request id; a finished id or a closed context is no error.
func (c *Context) cancel(id uint64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if !c.closed {
		C.llm_cancel(c.raw, C.llm_request_id(id))
	}
}

// Stream submits req and returns a channel of its events, closed after the
// last sequence's final event. Cancelling ctx cancels the request; the
// channel then still delivers the final event (FinishCancelled). Read the
// channel until it is closed.
func (c *Context) Stream(ctx context.Context, req Request) (<-chan Event, error) {
	id, s, err := c.submit(&req)
	if err != nil {
		return nil, err
	}
	out := make(chan Event, 16)
	go func() {
		defer close(out)
		done := ctx.Done()
		for {
			ev, ok, ctxDone := s.pop(done)
			if ctxDone {
				c.cancel(id)
				done = nil
				continue
			}
			if !ok {
				return
			}
			out <- ev
		}
	}()
	return out, nil
}

// Generate submits req and calls fn for each event on the calling goroutine
// (an iterator function). If fn returns an error, or ctx is cancelled, the
// request is cancelled and Generate returns that error (with the output so
// far). A sequence that failed in the engine returns its *Error.
func (c *Context) Generate(ctx context.Context, req Request, fn func(Event) error) (*Result, error) {
	id, s, err := c.submit(&req)
	if err != nil {
		return nil, err
	}
	res := &Result{}
	var stopErr error
	done := ctx.Done()
	for {
		ev, ok, ctxDone := s.pop(done)
		if ctxDone {
			c.cancel(id)
			done = nil
			if stopErr == nil {
				stopErr = ctx.Err()
			}
			continue
		}
		if !ok {
			break
		}
		res.add(ev)
		if ev.Err != nil && stopErr == nil {
			stopErr = ev.Err
		}
		if fn != nil && stopErr == nil {
			if err := fn(ev); err != nil {
				stopErr = err
				c.cancel(id)
			}
		}
	}
	return res, stopErr
}

// Complete generates and returns the whole output.
func (c *Context) Complete(ctx context.Context, req Request) (*Result, error) {
	return c.Generate(ctx, req, nil)
}

// ExportKVFile saves the KV of the cached prefix of tokens (a finished
// request's prompt + output) to the file path (llm_kv_export_file: written
// beside it and renamed) and returns how many tokens it saved (whole KV
// blocks).
func (c *Context) ExportKVFile(tokens []int32, cacheSalt uint64, path string) (int, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return 0, ErrClosed
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var toks *C.llm_token
	if len(tokens) > 0 {
		toks = (*C.llm_token)(C.calloc(C.size_t(len(tokens)), C.sizeof_llm_token))
		defer C.free(unsafe.Pointer(toks))
		copy(unsafe.Slice((*int32)(unsafe.Pointer(toks)), len(tokens)), tokens)
	}
	var n C.int32_t
	err := call(func() C.llm_status {
		return C.llm_kv_export_file(c.raw, toks, C.int32_t(len(tokens)), C.uint64_t(cacheSalt), cpath, &n)
	})
	return int(n), err
}

// ImportKVFile loads a file written by ExportKVFile into the prefix cache
// (llm_kv_import_file) and returns how many tokens a request starting with
// them now reuses. Another model's or geometry's file is StatusKVMismatch,
// a damaged one StatusKVCorrupt.
func (c *Context) ImportKVFile(cacheSalt uint64, path string) (int, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return 0, ErrClosed
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var n C.int32_t
	err := call(func() C.llm_status { return C.llm_kv_import_file(c.raw, C.uint64_t(cacheSalt), cpath, &n) })
	return int(n), err
}

// Tokenize returns the token ids of text (addSpecial: BOS as the model says).
func (c *Context) Tokenize(text string, addSpecial bool) ([]int32, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return nil, ErrClosed
	}
	var flags C.uint32_t
	if addSpecial {
		flags = C.LLM_TOKENIZE_ADD_SPECIAL
	}
	ctext := C.CString(text)
	defer C.free(unsafe.Pointer(ctext))
	capacity := len(text) + 8
	for {
		buf := (*C.llm_token)(C.calloc(C.size_t(capacity), C.sizeof_llm_token))
		var n C.int32_t
		err := call(func() C.llm_status {
			return C.llm_tokenize(c.raw, ctext, C.size_t(len(text)), flags, buf, C.int32_t(capacity), &n)
		})
		if e, ok := err.(*Error); ok && e.Status == StatusBufferTooSmall {
			C.free(unsafe.Pointer(buf))
			capacity = int(n)
			continue
		}
		out := append([]int32(nil), unsafe.Slice((*int32)(unsafe.Pointer(buf)), int(n))...)
		C.free(unsafe.Pointer(buf))
		return out, err
	}
}

// Devices reports each CUDA device the context's layers run on, in layer
// order (llm_get_device_stats); empty on the CPU backend.
func (c *Context) Devices() ([]DeviceStats, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return nil, ErrClosed
	}
	var out []DeviceStats
	for i, n := 0, 1; i < n; i++ {
		var d C.llm_device_stats
		d.struct_size = C.uint32_t(C.sizeof_llm_device_stats)
		st := C.llm_get_device_stats(c.raw, C.int32_t(i), &d)
		n = int(d.n_devices)
		if i >= n {
			break
		}
		if err := call(func() C.llm_status { return st }); err != nil {
			return nil, err
		}
		out = append(out, DeviceStats{int(d.device), int(d.first_layer), int(d.end_layer), uint64(d.weight_bytes),
			uint64(d.kv_pool_bytes), uint64(d.used_bytes), uint64(d.total_bytes)})
	}
	return out, nil
}
