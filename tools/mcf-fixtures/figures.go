package main

// -figures: mantle's own quantize throughput, RMSE and decode throughput per
// type, on Gaussian data and (optionally) on all-MiniLM-L6-v2. Printed as
// Markdown on stdout.

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/samcharles93/mantle/internal/mcfstore"
	"github.com/samcharles93/mantle/pkg/mcf"
)

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// timeQuantize runs `mantle quantize` 3 times; returns the median wall time.
func timeQuantize(in, out, m string) float64 {
	var ts []float64
	for i := 0; i < 3; i++ {
		os.Remove(out)
		t0 := time.Now()
		cmd := exec.Command(*mantleBin, "--log-level", "error", "quantize", "--input", in, "--output", out, "--method", m)
		if b, err := cmd.CombinedOutput(); err != nil {
			must(fmt.Errorf("quantize %s: %v %s", m, err, b))
		}
		ts = append(ts, time.Since(t0).Seconds())
	}
	return median(ts)
}

type errStats struct {
	sse, ssx float64
	n        int
}

// compare decodes every quantized tensor of out with mantle's decoder and
// accumulates the error against the same tensor of in (read as f32 by mantle).
// Returns the stats and the median time to decode all of them (3 runs).
func compare(in, out string) (errStats, float64, int64) {
	si, err := mcfstore.Open(in)
	must(err)
	defer si.Close()
	so, err := mcfstore.Open(out)
	must(err)
	defer so.Close()
	mf, err := mcf.Open(out)
	must(err)
	defer mf.Close()
	idx, err := mcf.ParseTensorIndexSection(mf.SectionData(mf.Section(mcf.SectionTensorIndex)))
	must(err)
	var st errStats
	var times []float64
	var outBytes int64
	for run := 0; run < 3; run++ {
		var dt time.Duration
		outBytes = 0
		for i := 0; i < idx.Count(); i++ {
			e, _ := idx.Entry(i)
			if !mcf.DTypeRequiresAligned64(e.DType) {
				continue
			}
			name0, _ := idx.Name(i)
			name := strings.Clone(name0)
			raw, info, err := so.ReadTensorRaw(name)
			must(err)
			t0 := time.Now()
			dec, err := decodeQuant(raw, info.DType, info.Shape)
			dt += time.Since(t0)
			must(err)
			outBytes += int64(len(dec)) * 4
			if run == 0 {
				ref, _, err := si.ReadTensorF32(name)
				must(err)
				for j := range ref {
					d := float64(ref[j]) - float64(dec[j])
					st.sse += d * d
					st.ssx += float64(ref[j]) * float64(ref[j])
				}
				st.n += len(ref)
			}
		}
		times = append(times, dt.Seconds())
	}
	return st, median(times), outBytes
}

func runFigures() {
	w := *work
	if w == "" {
		must(fmt.Errorf("-figures needs -work"))
	}
	must(os.MkdirAll(w, 0o755))
	fmt.Printf("mantle %s, %s, GOEXPERIMENT=%s, %s/%s, GOMAXPROCS=%d\n\n", *commit, runtime.Version(), os.Getenv("GOEXPERIMENT"), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0))
	in := filepath.Join(w, "gauss4096.mcf")
	r := rng(42)
	vals := gauss(r, 4096*4096, 1)
	writeWithWriter(in, mcfSpec{Tensors: []tensorSpec{{Name: "gauss", DType: mcf.DTypeF32, Shape: u64s(4096, 4096), Data: f32Bytes(vals)}}, Flags: mcf.FlagTensorDataAligned64})
	vals = nil
	inMB := float64(4096*4096*4) / 1e6
	fmt.Println("### Gaussian 4096x4096 f32 (N(0,1), PCG seed 42), 64 MiB")
	fmt.Println()
	fmt.Println("| type | quantize MB/s (f32 in, `mantle quantize` wall time) | RMSE | RMSE / RMS(x) | decode MB/s (f32 out, core.Mat.RowTo + cache check) |")
	fmt.Println("|---|---|---|---|---|")
	for _, m := range quantMethods {
		out := filepath.Join(w, "gauss-"+m+".mcf")
		t := timeQuantize(in, out, m)
		st, dt, ob := compare(in, out)
		fmt.Printf("| %s | %.1f | %.6g | %.6g | %.1f |\n", m, inMB/t, math.Sqrt(st.sse/float64(st.n)), math.Sqrt(st.sse/st.ssx), float64(ob)/1e6/dt)
		os.Remove(out)
	}
	fmt.Println()
	if *minilm == "" {
		return
	}
	packed := filepath.Join(w, "minilm.mcf")
	cmd := exec.Command(*mantleBin, "--log-level", "error", "pack", "--input", *minilm, "--output", packed)
	if b, err := cmd.CombinedOutput(); err != nil {
		must(fmt.Errorf("pack minilm: %v %s", err, b))
	}
	fi, _ := os.Stat(filepath.Join(*minilm, "model.safetensors"))
	fmt.Printf("### all-MiniLM-L6-v2 (model.safetensors %d bytes, packed with `mantle pack`; every 2-D f32 tensor quantized)\n\n", fi.Size())
	fmt.Println("| type | quantize MB/s (file in, `mantle quantize` wall time) | RMSE over quantized tensors | RMSE / RMS(x) | decode MB/s (f32 out) |")
	fmt.Println("|---|---|---|---|---|")
	pfi, _ := os.Stat(packed)
	for _, m := range quantMethods {
		out := filepath.Join(w, "minilm-"+m+".mcf")
		t := timeQuantize(packed, out, m)
		st, dt, ob := compare(packed, out)
		fmt.Printf("| %s | %.1f | %.6g | %.6g | %.1f |\n", m, float64(pfi.Size())/1e6/t, math.Sqrt(st.sse/float64(st.n)), math.Sqrt(st.sse/st.ssx), float64(ob)/1e6/dt)
		os.Remove(out)
	}
	fmt.Println()
}
