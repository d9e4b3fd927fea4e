package llmrt

import (
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
)

// The built-in model generates text: embeddings are refused with a status.
func TestEmbedOnAGenerativeModel(t *testing.T) {
	c := open(t)
	_, err := c.Embed([][]int32{{1, 50, 60}}, nil)
	if !errors.Is(err, &Error{Status: StatusUnsupported}) {
		t.Fatalf("got %v, want StatusUnsupported", err)
	}
}

// llm-synth's tiny BERT (skipped without the tool, ../../build/bin or
// $LLMRT_SYNTH): unit vectors of 64, a batch equal to single calls, clear
// errors for bad input.
func TestEmbedTinyBert(t *testing.T) {
	synth := os.Getenv("LLMRT_SYNTH")
	if synth == "" {
		synth = "../../build/bin/llm-synth"
	}
	if _, err := os.Stat(synth); err != nil {
		t.Skip("no llm-synth")
	}
	path := filepath.Join(t.TempDir(), "tiny-bert.gguf")
	if out, err := exec.Command(synth, "--shape", "tiny-bert", "--out", path, "--type", "f32").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	c, err := Open(&Params{ModelPath: path, Backend: BackendCPU, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	inputs := [][]int32{{2, 17, 40, 3}, {2, 200, 201, 202, 203, 3}}
	vecs, err := c.Embed(inputs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vecs {
		var n float64
		for _, x := range v {
			n += float64(x) * float64(x)
		}
		if len(v) != 64 || math.Abs(n-1) > 1e-5 {
			t.Errorf("vector %d: %d values, norm² %v", i, len(v), n)
		}
		one, err := c.Embed(inputs[i:i+1], nil)
		if err != nil || !reflect.DeepEqual(one[0], v) {
			t.Errorf("vector %d differs alone (%v)", i, err)
		}
	}
	cut, err := c.Embed(inputs[:1], &EmbedOptions{Dimensions: 16, Pooling: PoolingCLS})
	if err != nil || len(cut[0]) != 16 {
		t.Errorf("dimensions 16: %v", err)
	}
	if _, err := c.Embed([][]int32{{}}, nil); !errors.Is(err, &Error{Status: StatusInvalidArgument}) {
		t.Errorf("empty input: %v", err)
	}
	if _, err := c.Embed(inputs, &EmbedOptions{Dimensions: 65}); !errors.Is(err, &Error{Status: StatusInvalidArgument}) {
		t.Errorf("dimensions 65: %v", err)
	}
	if _, err := c.Embed(inputs, &EmbedOptions{Pooling: PoolingRank}); !errors.Is(err, &Error{Status: StatusUnsupported}) {
		t.Errorf("rank without a head: %v", err)
	}
}

// A cross-encoder pair without a rerank template: [BOS] q [EOS] [EOS] d [EOS].
func TestRerankTokensTinyBert(t *testing.T) {
	synth := os.Getenv("LLMRT_SYNTH")
	if synth == "" {
		synth = "../../build/bin/llm-synth"
	}
	if _, err := os.Stat(synth); err != nil {
		t.Skip("no llm-synth")
	}
	path := filepath.Join(t.TempDir(), "tiny-bert-rerank.gguf")
	if out, err := exec.Command(synth, "--shape", "tiny-bert-rerank", "--out", path, "--type", "f32").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	c, err := Open(&Params{ModelPath: path, Backend: BackendCPU, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ids, err := c.RerankTokens("w57", "w99 w12")
	if err != nil {
		t.Fatal(err)
	}
	q, err := c.Tokenize("w57", false)
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.Tokenize("w99 w12", false)
	if err != nil {
		t.Fatal(err)
	}
	want := append(append(append(append([]int32{2}, q...), 3, 3), d...), 3) // [CLS] = 2, [SEP] = 3
	if !reflect.DeepEqual(ids, want) {
		t.Fatalf("pair %v, want %v", ids, want)
	}
	scores, err := c.Embed([][]int32{ids}, &EmbedOptions{Pooling: PoolingRank, Raw: true})
	if err != nil || len(scores) != 1 || len(scores[0]) != 1 {
		t.Fatalf("scores %v, %v", scores, err)
	}
}
