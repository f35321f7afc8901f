// Package progress prints a GoMLX training loop's progress for the examples: GoMLX's progress
// bar on a terminal, plain rows (no terminal codes) when the output is a file or a pipe.
package progress

import (
	"fmt"
	"os"

	"github.com/gomlx/gomlx/core/tensors"
	"github.com/gomlx/gomlx/ml/train"
	"github.com/gomlx/gomlx/ui/commandline"
	"golang.org/x/term"
)

// Attach shows loop's progress: the progress bar when stdout is a terminal, else Rows.
func Attach(loop *train.Loop, trainer *train.Trainer, steps int) {
	if term.IsTerminal(int(os.Stdout.Fd())) {
		commandline.AttachProgressBar(loop)
		return
	}
	Rows(loop, trainer, steps)
}

// Rows prints a row every tenth of the run and at its end, counting finished steps from 1
// (the loop's LoopStep is the 0-based step in progress, so the last row reads "2000 of 2000").
func Rows(loop *train.Loop, trainer *train.Trainer, steps int) {
	every := max(1, steps/10)
	fmt.Printf("%11s  %s\n", "step", "training metrics (moving averages)")
	loop.OnStep("lathe progress", 0, func(l *train.Loop, metrics []*tensors.Tensor) error {
		done := l.LoopStep + 1
		if done%every != 0 && done != l.EndStep {
			return nil
		}
		row := fmt.Sprintf("%5d of %d", done, l.EndStep)
		for i, m := range trainer.TrainMetrics() {
			row += fmt.Sprintf("  %s %s", m.ShortName(), m.PrettyPrint(metrics[i]))
		}
		fmt.Println(row)
		return nil
	})
}
