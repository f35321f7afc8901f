package steps

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gomlx/compute"
	_ "github.com/gomlx/compute/gobackend" // registers "go"
	. "github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/ml/model"
)

// TestLMParams builds LM tiny in both attention forms on GoMLX's go backend and checks that
// NonEmbeddingParams (behind FLOPs) counts the variables the model creates, less the two
// embedding tables, and that the first loss is near ln(vocabulary).
func TestLMParams(t *testing.T) {
	backend, err := compute.NewWithConfig("go")
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Finalize()
	for _, explicit := range []bool{false, true} {
		c := LMTiny().WithAttention(explicit)
		w := LM(c)
		store := model.NewStore()
		e, err := model.NewExec(backend, store, func(scope *model.Scope, x, y *Node) *Node { return w.Loss(scope, x, y) })
		if err != nil {
			t.Fatal(err)
		}
		x, y := w.Inputs(rand.New(rand.NewPCG(1, 1)))
		out, err := e.Exec(x, y)
		if err != nil {
			t.Fatalf("%s: %v", w.Name, err)
		}
		l := out[0].Value().(float32)
		if lnV := math.Log(float64(c.Vocab)); math.Abs(float64(l)-lnV) > 2 {
			t.Errorf("%s: first loss %g, want near ln %d = %.3f", w.Name, l, c.Vocab, lnV)
		}
		n := 0
		for v := range store.IterVariables() {
			if !v.Trainable || strings.Contains(v.Scope(), "token") || strings.Contains(v.Scope(), "position") {
				continue
			}
			n += v.Shape().Size()
		}
		if n != c.NonEmbeddingParams() {
			t.Errorf("%s: the model has %d parameters outside the embeddings, NonEmbeddingParams says %d", w.Name, n, c.NonEmbeddingParams())
		}
		e.Finalize()
	}
	if got := GPT2Small().NonEmbeddingParams(); got != 123703633 {
		t.Errorf("GPT-2 small: %d parameters outside the embeddings, want 85054464 in the blocks + 1536 + 38647633 logits = 123703633", got)
	}
}
