package main

import (
	"testing"

	"github.com/gomlx/compute"

	"github.com/lathe-dev/lathe/bench/internal/steps"
	"github.com/lathe-dev/lathe/compute/lathe"
)

// The CNNs, their images' height split over two devices (layout sp), train as they do on one:
// GoMLX programs whose convolutions, their gradients and the max pool's are partitioned with halo
// exchanges, nothing run whole.
func TestSpatialCNN(t *testing.T) {
	// "same" convolutions; and GoMLX's default unpadded ones, whose outputs (28 and 12 rows from
	// 30 and 14) divide in 2 as their inputs do
	for _, w := range []steps.Workload{steps.CNNSame(2, 16), steps.CNNOf(2, 30)} {
		t.Run(w.Name, func(t *testing.T) { spatial(t, w) })
	}
}

func spatial(t *testing.T, w steps.Workload) {
	b, err := compute.NewWithConfig("lathe:cpu,devices=2")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Finalize()
	lb := b.(*lathe.Backend)
	ref, err := newReference(lb, w)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.init.free()
	single, _ := newLayout("single", 2)
	sp, err := newLayout("sp", 2)
	if err != nil {
		t.Fatal(err)
	}
	base, err := runLayout(lb, nil, w, single, ref, nil, 3, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	defer base.latheSnap.free()
	r, err := runLayout(lb, nil, w, sp, ref, base, 3, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	defer r.latheSnap.free()
	if r.statsErr != nil || !r.stats.Partitioned || r.stats.PartitionFallbacks != 0 {
		t.Errorf("stats %+v (%v): want partitioned, no fallbacks", r.stats, r.statsErr)
	}
	if r.latheLoss.rel > 1e-5 || r.latheWeights.abs > 1e-5 {
		t.Errorf("losses differ from one device's by %s, weights by %s", r.latheLoss, r.latheWeights)
	}
	t.Logf("sp: %d collectives; losses within %s, weights within %s", r.stats.PartitionCollectives, r.latheLoss,
		r.latheWeights)
}
