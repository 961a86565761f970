package cell

import "testing"

// A sample far from the window's mean is discarded once the window knows
// what is far; the mean stays the steady state's.
func TestSelectorDiscardsOutliers(t *testing.T) {
	var w window
	for i := range 50 {
		w.add(float64(1000+i%7), int64(i), true, true)
	}
	before := w.mean()
	if w.add(50_000, 50, true, true) {
		t.Fatal("a sample 50x the mean was kept")
	}
	if w.mean() != before || w.rejected != 1 {
		t.Fatalf("mean %.1f (was %.1f), %d rejected", w.mean(), before, w.rejected)
	}
	// Without the defense the spike moves the mean.
	var raw window
	for i := range 50 {
		raw.add(float64(1000+i%7), int64(i), false, true)
	}
	if !raw.add(50_000, 50, false, true) || raw.mean() < 1900 {
		t.Fatalf("without outlier rejection: mean %.1f", raw.mean())
	}
}

// When the conditions change for good (most samples of a period are
// "outliers"), the window is emptied and learns the new level.
func TestSelectorForgetsAChangedLevel(t *testing.T) {
	var w window
	for i := range 50 {
		w.add(float64(1000+i%7), int64(i), true, true)
	}
	now := int64(100)
	for i := range 300 {
		w.add(float64(9000+i%11), now, true, true)
		now++
	}
	if w.resets == 0 || w.mean() < 8000 {
		t.Fatalf("after a lasting change to 9000: mean %.1f, %d resets", w.mean(), w.resets)
	}
}

// A window idle longer than idleExpiry starts again.
func TestSelectorHistoryExpires(t *testing.T) {
	var w window
	for i := range 20 {
		w.add(1000, int64(i), true, true)
	}
	w.add(5000, 20+idleExpiry+1, true, true)
	if w.len() != 1 || w.mean() != 5000 {
		t.Fatalf("after an idle period: %d samples, mean %.1f; want the new sample alone", w.len(), w.mean())
	}
	var kept window
	for i := range 20 {
		kept.add(1000, int64(i), true, false)
	}
	kept.add(1100, 20+idleExpiry+1, true, false)
	if kept.len() != 21 {
		t.Fatalf("without expiry: %d samples, want 21", kept.len())
	}
}
