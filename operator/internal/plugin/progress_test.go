package plugin

import "testing"

func TestProgressBarRendersAFixedState(t *testing.T) {
	for _, tc := range []struct {
		done, total int64
		want        string
	}{
		{0, 5, "   0% [..............................]"},
		{2, 5, "  40% [===========>..................]"},
		{5, 5, " 100% [==============================]"},
		{7, 5, " 100% [==============================]"}, // more done than at start: full, not an error
		{0, 0, " 100% [==============================]"}, // nothing to drain
		{1 << 20, 4 << 20, "  25% [======>.......................]"},
	} {
		got := progressBar(tc.done, tc.total)
		if got != tc.want {
			t.Errorf("progressBar(%d, %d) = %q, want %q", tc.done, tc.total, got, tc.want)
		}
		if again := progressBar(tc.done, tc.total); again != got {
			t.Errorf("progressBar(%d, %d) is not deterministic: %q then %q", tc.done, tc.total, got, again)
		}
	}
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 3 << 20: "3.0 MiB",
		5<<30 + 512<<20: "5.5 GiB"} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
