// Package stats holds what the burst tools (cmd/bindrate, cmd/podwatch) report about waits.
package stats

import "math"

// Quantile of sorted values, nearest rank (q in (0, 1]); 0 for none.
func Quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	if i < 0 {
		i = 0
	}
	return sorted[i]
}
