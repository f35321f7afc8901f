package lathe

import (
	"testing"

	"github.com/gomlx/compute"
)

// TestEnumTables fails when compute lists a value that a table of enums.go does not: a new
// activation (or FFT type, layout, quantization) must be mapped by name, never by number.
func TestEnumTables(t *testing.T) {
	for _, a := range compute.ActivationTypeValues() {
		if _, ok := activations[a]; !ok {
			t.Errorf("compute.Activation%s is not in enums.go's activation table", a)
		}
	}
	for _, ft := range compute.FFTTypeValues() {
		if _, ok := fftTypes[ft]; !ok {
			t.Errorf("compute.FFT%s is not in enums.go's FFT table", ft)
		}
	}
	// The enums without a Values list: every value up to the first that has no name.
	for l := compute.DenseLayout(0); l.String() != "unknown"; l++ {
		if _, ok := denseLayouts[l]; !ok {
			t.Errorf("compute.DenseLayout%s is not in enums.go", l)
		}
	}
	for l := compute.AttentionAxesLayout(0); l.String() != "unknown"; l++ {
		if _, ok := attentionLayouts[l]; !ok {
			t.Errorf("compute.AttentionAxesLayout%s is not in enums.go", l)
		}
	}
	for q := compute.QuantizationScheme(0); q.String() != "unknown"; q++ {
		if _, ok := quantSchemes[q]; !ok {
			t.Errorf("compute.Quant%s is not in enums.go", q)
		}
	}
	for g := compute.GGMLQuantType(0); g.BytesPerBlock() != 0; g++ {
		if _, ok := ggmlTypes[g]; !ok {
			t.Errorf("compute.GGMLQuantType %d is not in enums.go", int(g))
		}
	}
	// a value from a newer compute: UNIMPLEMENTED naming it
	if _, err := activationOf("FusedDense", compute.ActivationType(1000)); !compute.IsNotImplemented(err) {
		t.Errorf("an unknown activation should be not implemented, got %v", err)
	}
}
