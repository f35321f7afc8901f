package main

import (
	"testing"

	"github.com/gomlx/compute"

	"github.com/lathe-dev/lathe/bench/internal/steps"
	"github.com/lathe-dev/lathe/compute/lathe"
)

// The CNN with "same" convolutions, its images' height split over two devices (layout sp), trains
// as it does on one: a GoMLX program whose convolutions, their gradients and the max pool's are
// partitioned with halo exchanges, nothing run whole.
func TestSpatialCNN(t *testing.T) {
	b, err := compute.NewWithConfig("lathe:cpu,devices=2")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Finalize()
	lb := b.(*lathe.Backend)
	w := steps.CNNSame(2, 16)
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
