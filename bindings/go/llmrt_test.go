package llmrt

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

type goldenCase struct {
	prompt    string
	promptIDs []int32
	generated []int32
}

func ids(s string) []int32 {
	var out []int32
	for _, f := range strings.Fields(s) {
		v, err := strconv.Atoi(f)
		if err != nil {
			panic(err)
		}
		out = append(out, int32(v))
	}
	return out
}

func golden(t *testing.T) []goldenCase {
	path := os.Getenv("LLMRT_GOLDEN")
	if path == "" {
		path = "../testdata/golden-greedy.tsv"
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []goldenCase
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		parts := strings.SplitN(line, "\t", 3)
		c := goldenCase{promptIDs: ids(parts[0]), generated: ids(parts[1])}
		if len(parts) == 3 {
			c.prompt = parts[2]
		}
		cases = append(cases, c)
	}
	if len(cases) < 5 {
		t.Fatalf("%d golden cases", len(cases))
	}
	return cases
}

func greedyRequest(c goldenCase) Request {
	s := Greedy()
	r := Request{Prompt: c.prompt, MaxTokens: len(c.generated), Sampling: &s}
	if c.prompt == "" {
		r.PromptTokens = c.promptIDs
	}
	return r
}

func open(t *testing.T) *Context {
	t.Helper()
	c, err := Open(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestGreedyMatchesGolden(t *testing.T) {
	c := open(t)
	for _, g := range golden(t) {
		res, err := c.Complete(context.Background(), greedyRequest(g))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(res.Tokens(), g.generated) {
			t.Errorf("prompt %q: got %v, want %v", g.prompt, res.Tokens(), g.generated)
		}
		if res.Finish() != FinishLength {
			t.Errorf("prompt %q: finish %v", g.prompt, res.Finish())
		}
	}
}

func TestStreamChannelAndIteratorAgree(t *testing.T) {
	c := open(t)
	g := golden(t)[1]
	ch, err := c.Stream(context.Background(), greedyRequest(g))
	if err != nil {
		t.Fatal(err)
	}
	var viaChan strings.Builder
	finals := 0
	for ev := range ch {
		viaChan.WriteString(ev.Text)
		if ev.Final {
			finals++
		}
	}
	var viaFn strings.Builder
	res, err := c.Generate(context.Background(), greedyRequest(g), func(ev Event) error {
		viaFn.WriteString(ev.Text)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if finals != 1 || viaChan.String() != viaFn.String() || res.Text() != viaFn.String() || res.Text() == "" {
		t.Fatalf("finals %d\nchan %q\nfn   %q\nres  %q", finals, viaChan.String(), viaFn.String(), res.Text())
	}
}

// 16 goroutines generate at once on one Context; one of them cancels
// through its context.Context after a few tokens.
func TestSixteenGoroutinesOneCancels(t *testing.T) {
	c := open(t)
	cases := golden(t)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if i == 7 {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				n := 0
				res, err := c.Generate(ctx, Request{Prompt: "Once upon a time", MaxTokens: 400, IgnoreEOS: true},
					func(ev Event) error {
						if n++; n == 3 {
							cancel()
						}
						return nil
					})
				if !errors.Is(err, context.Canceled) {
					errs <- errors.New("cancelled generation returned " + strconv.Quote(errString(err)))
				} else if res.Finish() != FinishCancelled || len(res.Tokens()) >= 400 {
					errs <- errors.New("cancelled generation finished " + res.Finish().String())
				}
				return
			}
			g := cases[i%len(cases)]
			ch, err := c.Stream(context.Background(), greedyRequest(g))
			if err != nil {
				errs <- err
				return
			}
			var got []int32
			for ev := range ch {
				if ev.Err != nil {
					errs <- ev.Err
				}
				if !ev.Final {
					got = append(got, ev.Token)
				}
			}
			if !reflect.DeepEqual(got, g.generated) {
				errs <- errors.New("goroutine " + strconv.Itoa(i) + ": output differs from golden for " + strconv.Quote(g.prompt))
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func TestCancelByCallbackErrorAndDeadline(t *testing.T) {
	c := open(t)
	stop := errors.New("enough")
	n := 0
	res, err := c.Generate(context.Background(), Request{Prompt: "The sun was", MaxTokens: 400, IgnoreEOS: true},
		func(Event) error {
			if n++; n == 5 {
				return stop
			}
			return nil
		})
	if err != stop || res.Finish() != FinishCancelled {
		t.Fatalf("err %v finish %v", err, res.Finish())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	time.Sleep(time.Millisecond)
	ch, err := c.Stream(ctx, Request{Prompt: "The sun was", MaxTokens: 400, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	var last Event
	for ev := range ch {
		last = ev
	}
	if !last.Final || last.Finish != FinishCancelled {
		t.Fatalf("last event %+v", last)
	}
}

func TestMissingModelFile(t *testing.T) {
	_, err := Open(&Params{ModelPath: "/nonexistent/model.gguf"})
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("got %v, want *Error", err)
	}
	if e.Status != StatusIO || !strings.Contains(e.Message, "/nonexistent/model.gguf") {
		t.Fatalf("status %v message %q", e.Status, e.Message)
	}
	if !errors.Is(err, &Error{Status: StatusIO}) {
		t.Fatal("errors.Is by status")
	}
}

func TestBadRequestAndClose(t *testing.T) {
	c, err := Open(nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Complete(context.Background(), Request{Prompt: "hi", MaxTokens: -1})
	if !errors.Is(err, &Error{Status: StatusInvalidArgument}) {
		t.Fatalf("got %v", err)
	}
	toks, err := c.Tokenize("Once upon a time", true)
	if err != nil || !reflect.DeepEqual(toks, golden(t)[0].promptIDs) {
		t.Fatalf("tokenize: %v %v", toks, err)
	}
	ch, err := c.Stream(context.Background(), Request{Prompt: "Once upon a time", MaxTokens: 400, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	<-ch
	c.Close()
	var last Event
	for ev := range ch {
		last = ev
	}
	if !last.Final {
		t.Fatalf("stream did not end with a final event: %+v", last)
	}
	if _, err := c.Stream(context.Background(), Request{Prompt: "x"}); err != ErrClosed {
		t.Fatalf("after Close: %v", err)
	}
	c.Close()
}

// Issue 20: logit bias, min_tokens, stop token ids and top logprobs.
func TestSamplingOptions(t *testing.T) {
	c := open(t)
	bg := context.Background()
	greedy := func(max int) Request {
		s := Greedy()
		return Request{Prompt: "Once upon a time", MaxTokens: max, Sampling: &s}
	}
	plain, err := c.Complete(bg, greedy(10))
	if err != nil {
		t.Fatal(err)
	}
	toks := plain.Tokens()

	// A banned token never appears.
	r := greedy(10)
	r.Sampling.LogitBias = map[int32]float32{toks[0]: float32(math.Inf(-1))}
	res, err := c.Complete(bg, r)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range res.Tokens() {
		if tok == toks[0] {
			t.Errorf("banned token %d sampled: %v", tok, res.Tokens())
		}
	}

	// stories260K's EOS (2), pushed to the top: one token at once, and
	// five (four, then EOS) with MinTokens 4.
	r = greedy(10)
	r.Sampling.LogitBias = map[int32]float32{2: 100}
	res, err = c.Complete(bg, r)
	if err != nil || !reflect.DeepEqual(res.Tokens(), []int32{2}) || res.Finish() != FinishStop {
		t.Fatalf("EOS at +100: %v %v %v", res.Tokens(), res.Finish(), err)
	}
	r.MinTokens = 4
	res, err = c.Complete(bg, r)
	if err != nil || len(res.Tokens()) != 5 || res.Tokens()[4] != 2 {
		t.Errorf("MinTokens 4: %v %v", res.Tokens(), err)
	}

	// A stop token id ends the sequence where it first appears.
	r = greedy(10)
	r.StopTokenIDs = []int32{toks[4]}
	res, err = c.Complete(bg, r)
	if err != nil || res.Tokens()[len(res.Tokens())-1] != toks[4] || res.Finish() != FinishStop {
		t.Errorf("stop token %d: %v %v %v", toks[4], res.Tokens(), res.Finish(), err)
	}

	// Top logprobs: k alternatives, the greedy token first.
	r = greedy(5)
	r.TopLogprobs = 3
	n := 0
	_, err = c.Generate(bg, r, func(ev Event) error {
		if ev.Final {
			return nil
		}
		n++
		if len(ev.TopLogprobs) != 3 || ev.TopLogprobs[0].Token != ev.Token || ev.TopLogprobs[0].Logprob != ev.Logprob ||
			ev.TopLogprobs[1].Logprob > ev.TopLogprobs[0].Logprob {
			t.Errorf("top logprobs of token %d: %+v", ev.Token, ev.TopLogprobs)
		}
		return nil
	})
	if err != nil || n != 5 {
		t.Errorf("%d token events, %v", n, err)
	}

	// Bad values: a status at submit.
	r = greedy(5)
	r.Sampling.LogitBias = map[int32]float32{1: float32(math.NaN())}
	var e *Error
	if _, err := c.Complete(bg, r); !errors.As(err, &e) || e.Status != StatusInvalidArgument {
		t.Errorf("NaN bias: %v", err)
	}
	r = greedy(5)
	r.TopLogprobs = 21
	if _, err := c.Complete(bg, r); !errors.As(err, &e) || e.Status != StatusInvalidArgument {
		t.Errorf("top_logprobs 21: %v", err)
	}
}

// Issue 20: constraint fields and tool-call parsing.
func TestConstraintAndToolCalls(t *testing.T) {
	c := open(t)
	// A choice and a regex: the output is one of the choices / matches.
	res, err := c.Complete(context.Background(), Request{Prompt: "Once upon a time", MaxTokens: 8, Sampling: ptrTo(Greedy()),
		ConstraintKind: ConstraintChoice, Choices: []string{"yes", "no"}})
	if err != nil || (res.Text() != "yes" && res.Text() != "no") {
		t.Fatalf("choice constraint: %v", err)
	}
	res, err = c.Complete(context.Background(), Request{Prompt: "Once upon a time", MaxTokens: 8,
		ConstraintKind: ConstraintRegex, Constraint: "[a-z]{2}[0-9]"})
	if err != nil || len(res.Text()) != 3 || res.Text()[2] < '0' || res.Text()[2] > '9' {
		t.Fatalf("regex constraint: %q %v", res.Text(), err)
	}
	// Issue 29: any whitespace on request, and a budget of 12 tokens still
	// ends a JSON object with EOS (the mask keeps it closable in time).
	res, err = c.Complete(context.Background(), Request{Prompt: "Once upon a time", MaxTokens: 12,
		ConstraintKind: ConstraintJSONObject, WhitespaceFlexible: true})
	if err != nil || !json.Valid([]byte(res.Text())) || res.Finish() != FinishStop {
		t.Fatalf("json object in 12 tokens: %q %v %v", res.Text(), res.Finish(), err)
	}
	if _, err := c.Complete(context.Background(), Request{Prompt: "hi", ConstraintKind: ConstraintGrammar, Constraint: "root ::= nothing"}); !errors.Is(err, &Error{Status: StatusInvalidArgument}) {
		t.Fatalf("a bad grammar: %v", err)
	}
	if _, err := c.Complete(context.Background(), Request{Prompt: "hi", ConstraintKind: ConstraintRegex, Constraint: "a\x00b"}); !errors.Is(err, &Error{Status: StatusInvalidArgument}) {
		t.Fatalf("NUL in a constraint: %v", err)
	}

	got, err := ParseToolCalls(ToolFormatHermes, `<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>`)
	if want := `{"content":"","tool_calls":[{"name":"f","arguments":{"x":1}}]}`; err != nil || got != want {
		t.Fatalf("hermes: %q %v", got, err)
	}
	var parsed struct {
		Content   string `json:"content"`
		ToolCalls []struct {
			Name      string                 `json:"name"`
			Arguments map[string]interface{} `json:"arguments"`
		} `json:"tool_calls"`
	}
	got, err = ParseToolCalls(ToolFormatAuto, "Sure.\n[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 2}}]")
	if err != nil || json.Unmarshal([]byte(got), &parsed) != nil || parsed.Content != "Sure." ||
		len(parsed.ToolCalls) != 1 || parsed.ToolCalls[0].Name != "add" || parsed.ToolCalls[0].Arguments["a"] != 2.0 {
		t.Fatalf("mistral: %q %v %+v", got, err, parsed)
	}
	// Content that grows when escaped takes the BUFFER_TOO_SMALL retry.
	got, err = ParseToolCalls(ToolFormatGeneric, strings.Repeat("\n", 1000))
	if want := `{"content":"` + strings.Repeat(`\n`, 1000) + `","tool_calls":[]}`; err != nil || got != want {
		t.Fatalf("long content: %d bytes, %v", len(got), err)
	}
	_, err = ParseToolCalls(ToolFormatHermes, `<tool_call>{"name": `)
	if e, ok := err.(*Error); !ok || e.Status != StatusInvalidArgument || !strings.Contains(e.Message, "truncated") {
		t.Fatalf("truncated call: %v", err)
	}
	if f, err := c.ToolFormat(); err != nil || f != ToolFormatGeneric {
		t.Fatalf("tool format of the built-in model: %v %v", f, err)
	}
}

// Issue 32: a prompt that opens the thinking ("<think>\n" at its end) and a
// DeepSeek-style request: every token is thinking, the answer is empty, and
// the thinking is the text the same greedy request gives without the format.
func TestReasoningFormat(t *testing.T) {
	c := open(t)
	req := Request{Prompt: "Once upon a time<think>\n", MaxTokens: 8, Sampling: ptrTo(Greedy())}
	plain, err := c.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	req.ReasoningFormat = ReasoningDeepSeek
	var reasoning, content strings.Builder
	_, err = c.Generate(context.Background(), req, func(ev Event) error {
		reasoning.WriteString(ev.Reasoning)
		content.WriteString(ev.Text)
		if !ev.Final && ev.Part != PartReasoning {
			t.Errorf("token %d: part %d", ev.Token, ev.Part)
		}
		return nil
	})
	if err != nil || content.String() != "" || reasoning.String() != strings.TrimSpace(plain.Text()) || reasoning.Len() == 0 {
		t.Fatalf("reasoning %q content %q plain %q %v", reasoning.String(), content.String(), plain.Text(), err)
	}
	req.ReasoningFormat = 9
	if _, err := c.Complete(context.Background(), req); !errors.Is(err, &Error{Status: StatusInvalidArgument}) {
		t.Fatalf("reasoning format 9: %v", err)
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestKVStateFile(t *testing.T) {
	a := open(t)
	prompt := []int32{1}
	for i := int32(1); i < 40; i++ {
		prompt = append(prompt, (7*i+11)%250+3)
	}
	g := Greedy()
	out, err := a.Generate(context.Background(), Request{PromptTokens: prompt, MaxTokens: 8, Sampling: &g, IgnoreEOS: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	conv := append(append([]int32(nil), prompt...), out.Tokens()...)
	path := filepath.Join(t.TempDir(), "conv.llmkv")
	n, err := a.ExportKVFile(conv, 0, path)
	if err != nil || n != 32 {
		t.Fatalf("export: %d %v (want 32: whole 16-token blocks of 47 computed tokens)", n, err)
	}
	b := open(t)
	if n, err := b.ImportKVFile(0, path); err != nil || n != 32 {
		t.Fatalf("import: %d %v", n, err)
	}
	again, err := b.Generate(context.Background(), Request{PromptTokens: conv, MaxTokens: 4, Sampling: &g, IgnoreEOS: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := again.Sequences[0].Metrics.CachedPromptTokens; c != 32 {
		t.Fatalf("cached prompt tokens %d, want 32 (the imported prefix)", c)
	}
	cold, err := a.Generate(context.Background(), Request{PromptTokens: conv, MaxTokens: 4, Sampling: &g, IgnoreEOS: true}, nil)
	if err != nil || fmt.Sprint(cold.Tokens()) != fmt.Sprint(again.Tokens()) {
		t.Fatalf("continuations differ: %v vs %v (%v)", again.Tokens(), cold.Tokens(), err)
	}
	if _, err := b.ImportKVFile(0, filepath.Join(t.TempDir(), "missing.llmkv")); !errors.Is(err, &Error{Status: StatusIO}) {
		t.Fatalf("missing file: %v", err)
	}
	if err := os.WriteFile(path, []byte("not a KV stream at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ImportKVFile(0, path); !errors.Is(err, &Error{Status: StatusKVCorrupt}) {
		t.Fatalf("damaged file: %v", err)
	}
}

// Disaggregation: a producer's descriptor, pulled by a consumer, continues
// like one context; without UCX the role is refused with StatusUnsupported.
func TestDisaggProducerConsumer(t *testing.T) {
	os.Setenv("UCX_TLS", "tcp")
	prod, err := Open(&Params{KVRole: KVRoleProducer})
	if errors.Is(err, &Error{Status: StatusUnsupported}) {
		t.Skip("built without UCX")
	}
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	cons, err := Open(&Params{KVRole: KVRoleConsumer})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	prompt := []int32{1}
	for i := int32(1); i < 40; i++ {
		prompt = append(prompt, (7*i+11)%250+3)
	}
	g := Greedy()
	pre, err := prod.Generate(context.Background(), Request{PromptTokens: prompt, MaxTokens: 1, Sampling: &g, KVProduce: true}, nil)
	if err != nil || pre.Sequences[0].KVTransferDesc == "" {
		t.Fatalf("producer: %v, descriptor %q", err, pre.Sequences[0].KVTransferDesc)
	}
	got, err := cons.Generate(context.Background(), Request{PromptTokens: prompt, MaxTokens: 8, Sampling: &g, IgnoreEOS: true,
		KVTransferDesc: pre.Sequences[0].KVTransferDesc}, nil)
	if err != nil || got.Sequences[0].KVTransferErr != nil || got.Sequences[0].TransferredPromptTokens != 32 {
		t.Fatalf("consumer: %v, transfer %v, %d tokens (want 32)", err, got.Sequences[0].KVTransferErr, got.Sequences[0].TransferredPromptTokens)
	}
	want, err := prod.Generate(context.Background(), Request{PromptTokens: prompt, MaxTokens: 8, Sampling: &g, IgnoreEOS: true}, nil)
	if err != nil || fmt.Sprint(want.Tokens()) != fmt.Sprint(got.Tokens()) {
		t.Fatalf("outputs differ: %v vs %v (%v)", got.Tokens(), want.Tokens(), err)
	}
}

func TestDevicesAndTensorSplit(t *testing.T) {
	// More shares than LLM_MAX_DEVICES: refused before the library is called.
	if _, err := Open(&Params{Backend: BackendCPU, TensorSplit: make([]float32, MaxDevices+1)}); !errors.Is(err, &Error{Status: StatusInvalidArgument}) {
		t.Fatalf("a 17-entry TensorSplit: %v", err)
	}
	// A negative share: the library's INVALID_ARGUMENT, whatever the backend.
	if _, err := Open(&Params{Backend: BackendCPU, TensorSplit: []float32{1, -1}}); !errors.Is(err, &Error{Status: StatusInvalidArgument}) {
		t.Fatalf("a negative share: %v", err)
	}
	// GPULayers: AUTO accepted (the CPU backend ignores it), below it refused.
	if GPULayersAuto != -2 || GPULayersAll != -1 {
		t.Fatalf("GPULayers constants %d %d", GPULayersAuto, GPULayersAll)
	}
	bad := GPULayersAuto - 1
	if _, err := Open(&Params{Backend: BackendCPU, GPULayers: &bad}); !errors.Is(err, &Error{Status: StatusInvalidArgument}) {
		t.Fatalf("GPULayers -3: %v", err)
	}
	auto := GPULayersAuto
	c, err := Open(&Params{Backend: BackendCPU, GPULayers: &auto})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d, err := c.Devices()
	if err != nil || len(d) != 0 {
		t.Fatalf("a CPU context's devices: %v %v", d, err)
	}
}

// K and V in different element types (llm_ctx_params.kv_type_v) on the CPU:
// the context runs; a V type that is no LLM_KV_* value reaches the library
// and is refused.
func TestKVTypesApart(t *testing.T) {
	c, err := Open(&Params{Backend: BackendCPU, ContextLength: 128, KVType: KVQ8_0, KVTypeV: KVF16})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Complete(context.Background(), Request{Prompt: "Once upon a time", MaxTokens: 4})
	if err != nil || len(res.Text()) == 0 {
		t.Fatalf("K q8_0 + V f16: %v %+v", err, res)
	}
	c.Close()
	_, err = Open(&Params{Backend: BackendCPU, KVTypeV: KVType(99)})
	var e *Error
	if !errors.As(err, &e) || e.Status != StatusInvalidArgument || !strings.Contains(e.Message, "kv_type_v") {
		t.Fatalf("KVTypeV 99: %v", err)
	}
	// FP8 E4M3 is a CUDA (sm_89+) pool: the CPU refuses it by name.
	if KVFP8E4M3 != 5 {
		t.Fatalf("KVFP8E4M3 = %d", KVFP8E4M3)
	}
	_, err = Open(&Params{Backend: BackendCPU, KVType: KVFP8E4M3})
	if !errors.As(err, &e) || e.Status != StatusUnsupported || !strings.Contains(e.Message, "fp8_e4m3") {
		t.Fatalf("KVFP8E4M3 on the CPU: %v", err)
	}
}
